//! End-to-end tests of the console against the real local stack: a real dispatcher parks
//! deliveries that a real receiver refuses, and the console (served on a loopback port)
//! lists, filters, shows, redrives and resolves them for users of each role.

mod console;
mod support;
