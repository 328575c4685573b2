//! The protocol `none`: no fault tolerance. It numbers nothing, keeps
//! nothing and answers every replay question with "decide as usual", so
//! the engine runs every entry point through the same seam whether a
//! protocol is chosen or not.

use super::{
    CallId, CommChange, CompletionKind, LoggedMessage, OutgoingMessage, PersistentInit, Protocol,
    RecvPlan, Replay, RequestInfo, SendGate, SendPlan, WaitKind,
};
use crate::error::Result;
use crate::lanes::LaneMap;
use crate::matching::RecvSpec;
use crate::recovery::EngineSnapshot;
use crate::status::Status;

/// No fault tolerance (`--protocol none`): what the engine runs when no
/// protocol is installed.
#[derive(Debug)]
pub struct NoProtocol {
    gate: SendGate,
}

impl Default for NoProtocol {
    fn default() -> NoProtocol {
        NoProtocol::new()
    }
}

impl NoProtocol {
    /// The protocol `none`.
    pub fn new() -> NoProtocol {
        let gate = SendGate::default();
        // Nothing to do for any send: the engine never calls `send`.
        gate.open_below(usize::MAX);
        NoProtocol { gate }
    }
}

impl Protocol for NoProtocol {
    fn name(&self) -> &'static str {
        "none"
    }
    fn takes_checkpoints(&self) -> bool {
        false
    }
    fn send(&mut self, _: &OutgoingMessage<'_>) -> Result<()> {
        Ok(())
    }
    fn send_gate(&self) -> Option<SendGate> {
        Some(self.gate.clone())
    }
    fn keep(&mut self, _: &OutgoingMessage<'_>) -> Result<SendPlan> {
        Ok(SendPlan::Transmit)
    }
    fn idle(&mut self) {}
    fn post_recv(&mut self, _: CallId, _: &mut RecvSpec) -> Result<RecvPlan> {
        Ok(RecvPlan::Post)
    }
    fn matched(&mut self, _: CallId, _: usize) -> Result<()> {
        Ok(())
    }
    fn completion(
        &mut self,
        _: CallId,
        _: CompletionKind,
        _: &[Option<RequestInfo>],
        _: &[usize],
    ) -> Result<()> {
        Ok(())
    }
    fn hears_waits(&self) -> bool {
        false
    }
    fn keeps_payloads(&self) -> bool {
        false
    }
    fn hears_posted_receives(&self) -> bool {
        false
    }
    fn waited(&mut self, _: WaitKind, _: &[Option<RequestInfo>]) -> Result<()> {
        Ok(())
    }
    fn communicator(&mut self, _: &CommChange<'_>) -> Result<()> {
        Ok(())
    }
    fn persistent(&mut self, _: &PersistentInit) -> Result<()> {
        Ok(())
    }
    fn probe(&mut self, _: CallId, _: bool, _: bool, _: Option<&Status>) -> Result<()> {
        Ok(())
    }
    fn cancel(&mut self, _: CallId, _: CallId, _: bool) -> Result<()> {
        Ok(())
    }
    fn finalize(&mut self) -> Result<()> {
        Ok(())
    }
    fn stats(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    fn take_restored(&mut self) -> Option<EngineSnapshot> {
        None
    }
    fn restart_state(&self) -> Option<Vec<u8>> {
        None
    }
    fn replay_ends(&self) -> Vec<(u32, u64)> {
        Vec::new()
    }
    fn replay_completion(&mut self, _: CallId, _: &[CallId]) -> Result<Replay<Vec<CallId>>> {
        Ok(Replay::Free)
    }
    fn replay_probe(
        &mut self,
        _: CallId,
        _: &RecvSpec,
        _: bool,
    ) -> Result<Replay<Option<(usize, i32)>>> {
        Ok(Replay::Free)
    }
    fn replay_cancel(&mut self, _: CallId, _: CallId) -> Result<Replay<bool>> {
        Ok(Replay::Free)
    }
    fn logged_messages(&mut self, _: usize, _: &LaneMap<u64>) -> Result<Vec<LoggedMessage>> {
        Ok(Vec::new())
    }
    fn checkpoint(&mut self, _: &EngineSnapshot, _: &[u8]) -> Result<Vec<(usize, u32, u64)>> {
        Ok(Vec::new())
    }
    fn free_log(&mut self, _: usize, _: u32, _: u64) -> Result<()> {
        Ok(())
    }
    fn recorded_incoming(&mut self, _: usize) -> Result<Vec<LoggedMessage>> {
        Ok(Vec::new())
    }
}
