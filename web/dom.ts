/**
 * The one way the page makes elements: every string becomes a text node,
 * never markup, and no attribute can be an event handler. Tool output is
 * data from untrusted commands; nothing here can turn it into code (the
 * server's Content-Security-Policy requires Trusted Types as well, so an
 * innerHTML assignment would throw).
 */

/** A child of {@link h}: a node, text (as a text node), or nothing. */
export type Child = Node | string | number | null | undefined | false;

/** Properties of {@link h}: a class, attributes (never `on…`), and listeners. */
export interface Props {
  class?: string;
  attrs?: Record<string, string>;
  on?: { [K in keyof HTMLElementEventMap]?: (e: HTMLElementEventMap[K]) => void };
}

/** A new `tag` element with `props` and `children`. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (props.class) el.className = props.class;
  for (const [name, value] of Object.entries(props.attrs ?? {})) {
    if (/^on/i.test(name)) throw new Error(`refusing event-handler attribute ${name}`);
    el.setAttribute(name, value);
  }
  for (const [type, fn] of Object.entries(props.on ?? {})) el.addEventListener(type, fn as EventListener);
  append(el, ...children);
  return el;
}

/** Appends `children` to `el`, strings as text nodes. */
export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

/** Replaces the children of `el`. */
export function replace(el: Node, ...children: Child[]): void {
  while (el.firstChild) el.removeChild(el.firstChild);
  append(el, ...children);
}

/**
 * `text` as nodes with every U+FFFD (a byte that was not valid UTF-8 in the
 * stored output) wrapped in a marked span, so it cannot pass for a character
 * the tool wrote. `lossy` false (a read page that says all its bytes were
 * UTF-8) leaves them unmarked: each is then a U+FFFD the tool itself wrote.
 */
export function textWithMarkers(text: string, lossy = true): Child[] {
  if (!lossy || !text.includes('\uFFFD')) return [text];
  const out: Child[] = [];
  const parts = text.split('\uFFFD');
  parts.forEach((p, i) => {
    if (p) out.push(p);
    if (i < parts.length - 1) out.push(h('span', { class: 'bad', attrs: { title: 'invalid UTF-8' } }, '\uFFFD'));
  });
  return out;
}

/** Goes to the view at `hash` (`#/call/<id>`, …). */
export function navigate(hash: string): void {
  location.hash = hash;
}
