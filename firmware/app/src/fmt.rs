//! Logging: through `log` with the `log` feature (the Linux build), nothing otherwise.
#![allow(unused_macros)]

#[cfg(feature = "log")]
macro_rules! info {
    ($($t:tt)*) => { ::log::info!($($t)*) };
}
#[cfg(feature = "log")]
macro_rules! warn {
    ($($t:tt)*) => { ::log::warn!($($t)*) };
}
#[cfg(not(feature = "log"))]
macro_rules! info {
    ($($t:tt)*) => {{
        if false {
            let _ = ::core::format_args!($($t)*);
        }
    }};
}
#[cfg(not(feature = "log"))]
macro_rules! warn {
    ($($t:tt)*) => {{
        if false {
            let _ = ::core::format_args!($($t)*);
        }
    }};
}
