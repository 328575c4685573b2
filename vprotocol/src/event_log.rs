//! What the pessimist protocol needs of the event loggers, as a trait.
//!
//! In a job, [`vpml_event_logger::Client`] implements it over sockets to
//! the logger servers; the simulator (`vpml-sim`) implements it in memory,
//! deciding from its seed when each event becomes durable. The protocol's
//! rules — commit before send, lazy logging of failed tests, replay from
//! the logged events, truncation below the older checkpoint — are written
//! once, against this trait.

use vpml_event_logger::{Client, ClientError, Event, EventId};

/// The event loggers, as one rank's protocol sees them.
pub trait EventLog {
    /// Hand `event` to the loggers (it becomes durable later); returns
    /// its id (ids are 1, 2, 3, … per rank).
    fn put(&self, event: &Event) -> Result<EventId, ClientError>;
    /// Highest id put so far.
    fn last_id(&self) -> EventId;
    /// Highest id known durable.
    fn durable(&self) -> EventId;
    /// Block until every event put so far is durable.
    fn wait_all_durable(&self) -> Result<(), ClientError>;
    /// Every logged event of this rank from id `from` on, in order.
    fn get_events(&self, from: EventId) -> Result<Vec<(EventId, Event)>, ClientError>;
    /// Free this rank's events up to `up_to` (a durable id).
    fn truncate(&self, up_to: EventId) -> Result<(), ClientError>;
    /// Keep `bytes` as copy `index` of this rank's checkpoint.
    fn save_copy(&self, index: u64, bytes: &[u8]) -> Result<(), ClientError>;
    /// The newest checkpoint copy of `rank`, if any.
    fn load_copy(&self, rank: u32) -> Result<Option<(u64, Vec<u8>)>, ClientError>;
}

impl EventLog for Client {
    fn put(&self, event: &Event) -> Result<EventId, ClientError> {
        Client::put(self, event)
    }
    fn last_id(&self) -> EventId {
        Client::last_id(self)
    }
    fn durable(&self) -> EventId {
        Client::durable(self)
    }
    fn wait_all_durable(&self) -> Result<(), ClientError> {
        Client::wait_all_durable(self)
    }
    fn get_events(&self, from: EventId) -> Result<Vec<(EventId, Event)>, ClientError> {
        Client::get_events(self, from)
    }
    fn truncate(&self, up_to: EventId) -> Result<(), ClientError> {
        Client::truncate(self, up_to).map(|_| ())
    }
    fn save_copy(&self, index: u64, bytes: &[u8]) -> Result<(), ClientError> {
        Client::save_copy(self, index, bytes)
    }
    fn load_copy(&self, rank: u32) -> Result<Option<(u64, Vec<u8>)>, ClientError> {
        Client::load_copy(self, rank)
    }
}
