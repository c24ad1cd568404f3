// Errors of the browser central: every failure is a BlerpcError with a stable `code`.

/** The stable error codes (`BlerpcError.code`). */
export type ErrorCode =
  | 'INVALID_ARGUMENT'
  | 'LINK_FAILED'
  | 'LINK_CLOSED'
  | 'FRAMING'
  | 'BLUETOOTH_UNAVAILABLE'
  | 'NO_DEVICE_SELECTED'
  | 'SETUP_TIMEOUT'
  | 'ENCRYPTION_UNAVAILABLE'
  | 'MTU_TOO_SMALL'
  | 'HANDSHAKE_FAILED'
  | 'HANDSHAKE_TIMEOUT'
  | 'IDENTITY_CHANGED'
  | 'IDENTITY_REJECTED'
  | 'KEY_STORE'
  | 'TIMEOUT'
  | 'CANCELLED'
  | 'PEER_ERROR'
  | 'BUSY'
  | 'REQUEST_TOO_LARGE'
  | 'RESPONSE_TOO_LARGE'
  | 'TOO_MANY_CALLS'
  | 'STREAM_ACTIVE'
  | 'STREAM_OVERFLOW'
  | 'CLOSED'
  | 'CALL_FAILED'
  | 'DECODE';

/** A bleRPC failure: `code` says which, `message` says what happened. */
export class BlerpcError extends Error {
  /** The stable code. */
  readonly code: ErrorCode;
  /** For `PEER_ERROR`: the ERROR byte the peripheral sent (1 RESPONSE_TOO_LARGE, 2 BUSY, ...). */
  readonly peerCode?: number;

  constructor(code: ErrorCode, message: string, peerCode?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BlerpcError';
    this.code = code;
    if (peerCode !== undefined) this.peerCode = peerCode;
  }
}

/** The wasm side's error (a plain Error named BlerpcError) as a BlerpcError instance. */
export function toBlerpcError(e: unknown): unknown {
  if (e instanceof BlerpcError) return e;
  const o = e as { name?: unknown; code?: unknown; message?: unknown; peerCode?: unknown } | null;
  if (o && o.name === 'BlerpcError' && typeof o.code === 'string') {
    const peer = typeof o.peerCode === 'number' ? o.peerCode : undefined;
    return new BlerpcError(o.code as ErrorCode, String(o.message), peer, { cause: e });
  }
  return e;
}

/** Awaits `p`, turning the wasm side's errors into BlerpcError instances. */
export async function settle<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    throw toBlerpcError(e);
  }
}

/** Runs `f`, turning a thrown wasm error into a BlerpcError instance. */
export function attempt<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw toBlerpcError(e);
  }
}
