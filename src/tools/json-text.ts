/**
 * A result whose JSON text is already made: the transport writes `text` as the result as it is,
 * so a large answer assembled from kept pieces (process list) is not serialized a second time.
 * Anything that serializes it the ordinary way gets the same value back through toJSON.
 */
export class JsonText {
  constructor(readonly text: string) {}

  /** The value, for a reader that wants it as an object (tests, a batch's generic path). */
  get value(): unknown {
    return JSON.parse(this.text);
  }

  toJSON(): unknown {
    return this.value;
  }
}
