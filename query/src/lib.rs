//! Strata's SQL layer (placeholder): later issues add parsing, planning and execution over
//! `strata-engine`. Nothing is public yet.
