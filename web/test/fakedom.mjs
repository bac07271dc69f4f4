// A small stand-in DOM for the views' unit tests: elements that keep
// their children, attributes and listeners, found by data-testid.
// fakeDocument() installs it and returns the function that removes it.

export function fakeDocument() {
  class FakeNode {}
  class FakeElement extends FakeNode {
    constructor(tag) {
      super();
      this.tag = tag;
      this.children = [];
      this.attrs = {};
      this.listeners = {};
      this.dataset = {};
      this.style = { setProperty() {} };
      this.parent = null;
      this.value = '';
      this.text = '';
      const classes = new Set();
      this.classList = {
        add: (c) => classes.add(c),
        remove: (c) => classes.delete(c),
        contains: (c) => classes.has(c),
        toggle: (c, on = !classes.has(c)) => (on ? classes.add(c) : classes.delete(c), on),
      };
    }
    get hidden() {
      return 'hidden' in this.attrs;
    }
    set hidden(v) {
      if (v) this.attrs.hidden = '';
      else delete this.attrs.hidden;
    }
    get textContent() {
      return this.text + this.children.map((c) => c.textContent ?? c.text ?? '').join('');
    }
    set textContent(v) {
      this.children = [];
      this.text = String(v);
    }
    setAttribute(k, v) {
      this.attrs[k] = v;
    }
    getAttribute(k) {
      return this.attrs[k] ?? null;
    }
    addEventListener(type, fn) {
      (this.listeners[type] ||= []).push(fn);
    }
    /** Calls the type listeners with an event of props (key, shiftKey...) on top. */
    dispatch(type, props = {}) {
      for (const fn of this.listeners[type] || []) fn({ type, target: this, preventDefault() {}, key: '', ...props });
    }
    replaceWith(n) {
      const p = this.parent;
      if (!p) return;
      if (n.parent) n.remove();
      p.children = p.children.map((c) => (c === this ? n : c));
      n.parent = p;
      this.parent = null;
    }
    remove() {
      if (this.parent) this.parent.children = this.parent.children.filter((c) => c !== this);
      this.parent = null;
    }
    get isConnected() {
      return this.parent !== null;
    }
    focus() {
      document.activeElement = this;
    }
    setSelectionRange() {}
    get firstChild() {
      return this.children[0] ?? null;
    }
    get nextSibling() {
      const s = this.parent ? this.parent.children : [];
      return s[s.indexOf(this) + 1] ?? null;
    }
    appendChild(c) {
      c.parent = this;
      this.children.push(c);
      return c;
    }
    insertBefore(c, ref) {
      if (c.parent) c.remove();
      c.parent = this;
      const i = ref ? this.children.indexOf(ref) : -1;
      if (i < 0) this.children.push(c);
      else this.children.splice(i, 0, c);
      return c;
    }
    replaceChildren(...cs) {
      this.children = [];
      this.text = '';
      for (const c of cs) this.appendChild(c);
    }
    closest() {
      return null;
    }
    find(testid) {
      if (this.attrs['data-testid'] === testid) return this;
      for (const c of this.children) {
        const f = c instanceof FakeElement ? c.find(testid) : null;
        if (f) return f;
      }
      return null;
    }
    /** The first element under this one of class c, for a ".c" selector (the views' only kind). */
    querySelector(sel) {
      for (const c of this.children) {
        if (!(c instanceof FakeElement)) continue;
        if (sel.startsWith('.') && String(c.className ?? '').split(' ').includes(sel.slice(1))) return c;
        const f = c.querySelector(sel);
        if (f) return f;
      }
      return null;
    }
    findAll(testid, out = []) {
      if (this.attrs['data-testid'] === testid) out.push(this);
      for (const c of this.children) if (c instanceof FakeElement) c.findAll(testid, out);
      return out;
    }
  }
  globalThis.Node = FakeNode;
  globalThis.document = {
    createElement: (tag) => new FakeElement(tag),
    createElementNS: (_, tag) => new FakeElement(tag),
    createTextNode: (text) => Object.assign(new FakeNode(), { text }),
    body: new FakeElement('body'),
    activeElement: null,
    listeners: {},
    addEventListener(type, fn) {
      (this.listeners[type] ||= []).push(fn);
    },
    removeEventListener(type, fn) {
      this.listeners[type] = (this.listeners[type] || []).filter((f) => f !== fn);
    },
    /** Calls the document's type listeners, as FakeElement.dispatch. */
    dispatch(type, props = {}) {
      for (const fn of [...(this.listeners[type] || [])]) fn({ type, target: this.activeElement, preventDefault() {}, key: '', ...props });
    },
  };
  return () => {
    delete globalThis.Node;
    delete globalThis.document;
  };
}
