// A GATT link the app provides (on a phone the platform owns the radio): the app connects,
// negotiates the MTU (247), discovers the bleRPC characteristic and subscribes, then hands
// the connection over as a `GattLink` (which it implements) and a `GattInbox` (which its
// BLE callbacks feed). Setup, encryption, pinning and the call table are the Rust core's,
// as on every other link. docs/bindings.md gives the Android (`BluetoothGatt`) adapter.

package dev.blerpc

/**
 * The app's side of a GATT connection to a bleRPC peripheral: `attMtu()` (the negotiated
 * ATT MTU), `peerId()` (a stable name: pins are kept under it), `suspend
 * writeWithoutResponse(pdu)` (one PDU as a write without response; return once the stack has
 * taken it: pace here, e.g. until Android's `onCharacteristicWrite`), `suspend disconnect()`.
 * Called from the library's thread; an exception from a write fails the link (`LINK_FAILED`).
 */
typealias GattLink = dev.blerpc.ffi.GattLink

/**
 * Where the app's BLE callbacks deliver each notification of the bleRPC characteristic, in
 * order (`notification(value)`, `false` once the inbox takes no more), and the disconnection
 * (`disconnected(reason)`). Never blocks. Bounded (`GattInbox(capacity)`, default 256): a
 * notification that finds it full fails the link rather than holding more memory. One inbox
 * serves one [connectGatt].
 */
typealias GattInbox = dev.blerpc.ffi.GattInbox

/**
 * A store of pinned identity keys the app provides (`SharedPreferences`, the Keystore, a
 * database): `get(deviceId)` → the key (64 hex digits) or null, `put(deviceId, key)`. Give
 * it as `ConnectOptions(keyStore = …)`: trust on first use stays the core's (a different
 * key later is refused with `IDENTITY_CHANGED`; a store that throws refuses the connection
 * with `KEY_STORE`).
 */
typealias KeyStore = dev.blerpc.ffi.KeyStore

/**
 * Connects over a GATT link the app provides ([link], already connected and subscribed;
 * [inbox], fed by its callbacks) and runs setup and the key exchange with the identity check
 * [options] ask for (the default pins the key on first use, under `link.peerId()`, in the
 * default known-keys file). Cancelling the coroutine stops the attempt.
 *
 * @throws dev.blerpc.ffi.BlerpcException `Setup` (e.g. `IDENTITY_CHANGED`), `Connection`
 *   (`LINK_FAILED`, `LINK_CLOSED`), `InvalidArgument` (an inbox already used).
 */
suspend fun connectGatt(link: GattLink, inbox: GattInbox, options: ConnectOptions = ConnectOptions()): Connection =
    Connection(dev.blerpc.ffi.connectGatt(link, inbox, options))

/**
 * The length of the bleRPC container that starts [bytes] (from its header), or null if the
 * header is incomplete: for bridges that carry a GATT link's PDUs over a byte stream (each
 * container is one notification).
 */
fun containerLen(bytes: ByteArray): Int? = dev.blerpc.ffi.containerLen(bytes)?.toInt()
