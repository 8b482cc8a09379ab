//! The publisher's kit, shared by every transport's `publish`: the frames
//! it sends ([`source`]), the worker processes it starts and collects
//! ([`workers`]), and what it measures ([`measured`]). Nothing here knows
//! a transport but by name.

pub mod measured;
pub mod source;
pub mod workers;
