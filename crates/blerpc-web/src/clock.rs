//! The browser's clock and timer for the core: `performance.now()` turned into
//! [`blerpc_proto::Instant`], and one `setTimeout` per connection for the core's next deadline.
//!
//! Both come from the global scope, so a connection also runs in a Web Worker. Browsers clamp
//! timers in background tabs (about once a second in Chromium): a deadline there can fire up
//! to a second late, never early.

use blerpc_proto::Instant;
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(callback: &js_sys::Function, ms: f64) -> JsValue;
    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(id: &JsValue);
}

/// Milliseconds on the page's monotonic clock (`performance.now()`).
pub fn now_ms() -> f64 {
    performance_now()
}

/// The core's clock: microseconds since the connection's clock was made.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin_ms: f64,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        Clock {
            origin_ms: now_ms(),
        }
    }

    /// Now, as the core counts it.
    pub fn now(&self) -> Instant {
        self.at(now_ms())
    }

    /// `ms` (a `performance.now()` reading) as the core counts it.
    pub fn at(&self, ms: f64) -> Instant {
        let micros = ((ms - self.origin_ms) * 1000.0).max(0.0);
        // Saturating float-to-int: a page open for 584,000 years stays at the end of time.
        Instant::from_micros(micros as u64)
    }

    /// Milliseconds from now until `t` (0 if it has passed).
    pub fn ms_until(&self, t: Instant) -> f64 {
        let t_ms = t.as_micros() as f64 / 1000.0 + self.origin_ms;
        (t_ms - now_ms()).max(0.0)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// One re-armable `setTimeout` calling the same callback.
pub struct Timer {
    callback: Closure<dyn FnMut()>,
    armed: Option<(Instant, JsValue)>,
}

impl Timer {
    /// A timer that calls `callback` when it fires.
    pub fn new(callback: impl FnMut() + 'static) -> Self {
        Timer {
            callback: Closure::new(callback),
            armed: None,
        }
    }

    /// Fires at `deadline` (nothing if `None`); re-arms only when the deadline changed.
    pub fn set(&mut self, clock: &Clock, deadline: Option<Instant>) {
        if self.armed.as_ref().map(|(t, _)| *t) == deadline {
            return;
        }
        self.cancel();
        if let Some(t) = deadline {
            // Round up: a timer that fires a little early would find nothing due and re-arm.
            let ms = clock.ms_until(t).ceil();
            let id = set_timeout(self.callback.as_ref().unchecked_ref(), ms);
            self.armed = Some((t, id));
        }
    }

    /// The timer fired: it is no longer armed.
    pub fn fired(&mut self) {
        self.armed = None;
    }

    /// Disarms the timer.
    pub fn cancel(&mut self) {
        if let Some((_, id)) = self.armed.take() {
            clear_timeout(&id);
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// A promise settled after `ms` milliseconds.
pub async fn sleep(ms: f64) {
    let mut resolve = None;
    let p = js_sys::Promise::new(&mut |res, _| resolve = Some(res));
    if let Some(res) = resolve {
        set_timeout(&res, ms);
    }
    let _ = wasm_bindgen_futures::JsFuture::from(p).await;
}

/// Runs `callback` once after `ms` milliseconds unless the returned guard is dropped first.
pub struct Deadline {
    id: JsValue,
    _callback: Closure<dyn FnMut()>,
}

impl Deadline {
    /// Calls `callback` after `ms`.
    pub fn after(ms: f64, callback: impl FnMut() + 'static) -> Self {
        let callback = Closure::new(callback);
        let id = set_timeout(callback.as_ref().unchecked_ref(), ms);
        Deadline {
            id,
            _callback: callback,
        }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        clear_timeout(&self.id);
    }
}
