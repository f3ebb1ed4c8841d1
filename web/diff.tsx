/** A unified diff as lines, each a text node with the class of its kind: never markup. */
export function Diff({ text }: { text: string }) {
  const lines = text.split('\n');
  return (
    <pre class="diff" aria-label="diff">
      {lines.map((l) => {
        const kind = l.startsWith('+++') || l.startsWith('---') ? 'file' : l.startsWith('@@') ? 'hunk' : l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : 'ctx';
        return <span class={`d-${kind}`}>{l}{'\n'}</span>;
      })}
    </pre>
  );
}
