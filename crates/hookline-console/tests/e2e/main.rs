//! End-to-end tests of the console against the real local stack: a real dispatcher parks
//! deliveries that a real receiver refuses, and the console (served on a loopback port)
//! lists, filters, shows, redrives, resolves and archives them for users of each role.

mod archive;
mod console;
mod poison;
mod security;
mod support;
