/**
 * A result whose JSON is already made, as UTF-8 bytes: the transport writes them as the result
 * as they are, so a large answer put together from kept pieces (process list) is neither
 * serialized nor encoded a second time. A small one kept to be given again (a quiet poll's) is
 * held as a string instead, which the transport writes in the response's one string. Anything
 * that serializes it the ordinary way gets the same value back through toJSON.
 */
export class JsonText {
  /**
   * `written`: called by the transport once the bytes are out (the socket is done with them), so
   * their owner may use the buffer again. A reader that keeps the bytes, or never writes them,
   * simply does not call it.
   */
  constructor(
    readonly bytes: Buffer | string,
    readonly written?: () => void,
  ) {}

  /** The value, for a reader that wants it as an object (tests, a batch's generic path). */
  get value(): unknown {
    return JSON.parse(typeof this.bytes === 'string' ? this.bytes : this.bytes.toString('utf8'));
  }

  toJSON(): unknown {
    return this.value;
  }
}
