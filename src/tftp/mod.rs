//! The read-only TFTP server that hands network-boot ROMs their iPXE loader. `session` is the
//! pure protocol (packets, options, the sending state machine, path checks); `server` owns the
//! sockets, the files and the cap on concurrent transfers; `burst` sends a window's packets.

mod burst;
pub mod server;
pub mod session;
