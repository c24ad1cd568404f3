// The part of Web Bluetooth this package names (TypeScript's DOM library has no Web Bluetooth).
// Pages that use @types/web-bluetooth get the full interface; this one merges with it.

declare global {
  interface BluetoothDevice extends EventTarget {
    readonly id: string;
    readonly name?: string;
  }
}

export {};
