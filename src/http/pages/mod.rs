//! The server-rendered dashboard: the pages and their forms (`ui.rs`), the view models they
//! render (`views.rs`) and a deployment's timeline as SVG (`timeline.rs`). Sign-in, the Account
//! and Audit pages live with access control (`access/login.rs`).

pub mod timeline;
pub mod ui;
pub mod views;
