//! Strata's network server (placeholder): later issues add the RESP and PostgreSQL protocols.
//! Nothing is public yet.
