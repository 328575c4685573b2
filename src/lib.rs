//! # vpml — message passing that survives crashes
//!
//! vpml is an MPI-style message-passing runtime for Rust whose
//! point-to-point layer can be wrapped, at run time, by a fault-tolerance
//! protocol. This facade is what applications use:
//!
//! ```
//! let world = vpml::init()?;
//! println!("rank {} of {}", world.rank(), world.size());
//! # Ok::<(), vpml::Error>(())
//! ```
//!
//! Start a job with `vpml run -n 4 ./my-program`. See the engine crate
//! ([`vpml_pml`]) for the design of the layers.

pub use vpml_pml::*;

/// Start this process's part of the job with the fault-tolerance protocol
/// the launcher chose (`vpml run --protocol …`, or `VPML_PROTOCOL`): the
/// replay debugger's (`vpml replay`) comes from `vpml-replay`, the others
/// from `vpml-vprotocol`.
pub fn init() -> Result<World> {
    use vpml_vprotocol::ProtocolName;
    vpml_pml::init_with(|cfg| match cfg.protocol.name {
        ProtocolName::Replay => vpml_replay::build(cfg),
        ProtocolName::None | ProtocolName::Pessimist | ProtocolName::Coordinated => {
            vpml_vprotocol::build(cfg)
        }
    })
}
