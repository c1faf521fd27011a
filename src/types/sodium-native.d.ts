/** The part of sodium-native (libsodium's bindings; the package ships no types) that is used. */
declare module 'sodium-native' {
  interface Sodium {
    readonly crypto_sign_PUBLICKEYBYTES: number;
    readonly crypto_sign_SECRETKEYBYTES: number;
    readonly crypto_sign_BYTES: number;
    /** Whether `signature` (64 bytes) is `publicKey`'s Ed25519 signature of `message`; throws on wrong sizes. */
    crypto_sign_verify_detached(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean;
    /** Writes the 64-byte Ed25519 signature of `message` into `signature`. */
    crypto_sign_detached(signature: Uint8Array, message: Uint8Array, secretKey: Uint8Array): void;
    /** The key pair of a 32-byte seed (an Ed25519 private key as RFC 8032 defines it). */
    crypto_sign_seed_keypair(publicKey: Uint8Array, secretKey: Uint8Array, seed: Uint8Array): void;
  }
  const sodium: Sodium;
  export default sodium;
}
