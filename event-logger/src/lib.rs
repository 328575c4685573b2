//! Placeholder: the event logger (issue 6) is being written.
