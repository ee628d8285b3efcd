//! Helpers shared by integration tests (each test crate includes what it uses with `mod
//! support;`); kept out of the library's public API.

pub mod power_loss;
