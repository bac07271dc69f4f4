// What the e2e specs share: the browser they launch, the dev-mode API
// client (a token per user from /dev/token), signing in through the dev
// form, and the locators every scenario reads the inbox and a
// conversation with. One copy, so a change to the dev sign-in or to a
// test id is made once for chat, lifecycle and push alike.

import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import { chromium } from 'playwright-core';

/** The flags headless Chromium runs with in CI containers (no sandbox, no GPU, no background traffic). */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--no-first-run',
];

/** Launches headless Chromium from executablePath. */
export const launchChromium = (executablePath, args = CHROMIUM_ARGS) => chromium.launch({ executablePath, headless: true, args });

/**
 * The frame of a browser spec: the chatd under test (CHATD_URL, in dev
 * mode) and its dev API, headless Chromium (CHROMIUM_PATH) launched
 * before the spec's tests and closed after them (spec.browser), and the
 * pages devSignIn opened (spec.pages).
 */
export function browserSpec() {
  const BASE = process.env.CHATD_URL;
  if (!BASE) throw new Error('set CHATD_URL to a chatd running with --dev');
  const spec = { BASE, browser: null, pages: [], ...devAPI(BASE) };
  before(async () => {
    spec.browser = await launchChromium(process.env.CHROMIUM_PATH || '/usr/bin/chromium');
  });
  after(async () => {
    await spec.browser?.close();
  });
  return spec;
}

/**
 * Polls fn until it stops throwing; rethrows its last error on timeout,
 * with what explain() resolves to appended when it is given.
 * The default is Playwright's own (30 s): CI runs the browser tests beside
 * the other packages' on two cores, where a hidden page's notification
 * took over 15 s to appear.
 */
export async function eventually(fn, { timeout = 30000, interval = 100, explain = null } = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > end) {
        if (!explain) throw e;
        const why = await explain().catch((x) => `(explain failed: ${x.message})`);
        throw new Error(`${e.message}\n${why}`, { cause: e });
      }
      await new Promise((r) => setTimeout(r, interval));
    }
  }
}

/**
 * Checks that fn keeps passing (does not throw) for duration ms, polling
 * it; rethrows the first failure at once. For what must not happen: a
 * would-be duplicate, a count that must not move, a navigation that must
 * not come, given time to appear.
 */
export async function stays(fn, { duration = 1000, interval = 100 } = {}) {
  const end = Date.now() + duration;
  for (;;) {
    await fn();
    if (Date.now() >= end) return;
    await new Promise((r) => setTimeout(r, interval));
  }
}

/**
 * Starts recording every text the page's [data-testid=id] elements show,
 * as they change; texts(page, id) returns them in order. For what is on
 * screen only briefly (a "retrying in 1 s"), which a poll from here can
 * miss when a round trip to the browser takes longer than it lasts.
 */
export async function recordTexts(page, id) {
  await page.evaluate((id) => {
    const seen = (window.__texts ??= {});
    const list = (seen[id] = []);
    const look = () => {
      for (const el of document.querySelectorAll(`[data-testid="${id}"]`)) {
        const t = el.textContent;
        if (list.at(-1) !== t) list.push(t);
      }
    };
    new MutationObserver(look).observe(document.documentElement, { subtree: true, childList: true, characterData: true, attributes: true });
    look();
  }, id);
}

/** The texts recordTexts(page, id) saw, oldest first. */
export const texts = (page, id) => page.evaluate((id) => window.__texts?.[id] ?? [], id);

/**
 * What the page shows of its inbox and connection, for a failure message:
 * a wait on a badge that timed out says whether the conversation was open,
 * the row missing, or the page offline.
 */
export async function inboxFacts(page) {
  const facts = await page.evaluate(() => ({
    hash: location.hash,
    visibility: document.visibilityState,
    connection: document.querySelector('[data-testid=connection]')?.dataset.state,
    open: document.querySelector('[data-testid=conversation]')?.dataset.convId ?? null,
    focus: document.activeElement?.dataset?.convId ?? document.activeElement?.tagName,
    rows: [...document.querySelectorAll('[data-testid=conv-row]')].map((r) => ({
      id: r.dataset.convId,
      current: r.getAttribute('aria-current'),
      unread: r.querySelector('[data-testid=unread]')?.textContent ?? '0',
      preview: r.querySelector('.conv-preview')?.textContent,
    })),
    messages: [...document.querySelectorAll('[data-testid=message-body]')].map((m) => m.textContent),
  }));
  return `page: ${JSON.stringify(facts)}`;
}

/**
 * The HTTP API of the chatd at base in dev mode: token(uid) mints (once)
 * and api(uid, ...) calls as uid, to set up data or act as another member;
 * sendAs(uid, cid, body) sends a message as uid.
 */
export function devAPI(base) {
  const tokens = new Map();
  async function token(uid) {
    if (!tokens.has(uid)) {
      const res = await fetch(`${base}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ userId: uid }) });
      assert.equal(res.status, 200, 'POST /dev/token');
      tokens.set(uid, (await res.json()).token);
    }
    return tokens.get(uid);
  }
  async function api(uid, method, p, body) {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { Authorization: `Bearer ${await token(uid)}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const data = res.status === 204 ? null : await res.json();
    assert.ok(res.ok, `${method} ${p}: ${res.status} ${JSON.stringify(data)}`);
    return data;
  }
  /** uid sends body (with extra fields: replyTo…) to conversation cid: the message chatd answers. */
  const sendAs = (uid, cid, body, extra = {}) =>
    api(uid, 'POST', `/v1/conversations/${cid}/messages`, { clientMsgId: crypto.randomUUID(), body, ...extra });
  return { token, api, sendAs };
}

/**
 * Opens a fresh browser context (its own storage: a separate person),
 * signs uid in through the dev sign-in form at base and waits until it is
 * online. The record it returns (also pushed to pages) collects the
 * page's dialogs and errors for the spec to check.
 */
export async function devSignIn(browser, pages, uid, { base, viewport = { width: 1280, height: 800 }, deviceScaleFactor = 1 }) {
  const context = await browser.newContext({ viewport, deviceScaleFactor, locale: 'en-GB', timezoneId: 'UTC' });
  context.setDefaultTimeout(10000);
  const page = await context.newPage();
  const rec = { uid, page, context, dialogs: [], errors: [] };
  page.on('dialog', (d) => {
    rec.dialogs.push(d.message());
    d.dismiss().catch(() => {});
  });
  page.on('pageerror', (e) => rec.errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    // Failed fetches while the network is cut are expected; a CSP
    // violation or an exception is not.
    const t = m.text();
    if (m.type() === 'error' && /Content Security Policy|Uncaught|TypeError|ReferenceError/.test(t)) rec.errors.push(`console: ${t}`);
  });
  pages.push(rec);
  await page.goto(base);
  await page.getByTestId('dev-user').fill(String(uid));
  await page.getByTestId('dev-signin').click();
  await online(page);
  return rec;
}

/**
 * The direct conversation peer opens with me, messages (each [sender,
 * body]) sent in it, open in a page me signed in to at base (spec.BASE by
 * default) and showing them: { conv, a }, a being devSignIn's record.
 */
export async function openDirect(spec, me, peer, messages, { base = spec.BASE } = {}) {
  const conv = await spec.api(peer, 'POST', `/v1/direct/${me}`);
  for (const [from, body] of messages) {
    await spec.sendAs(from, conv.id, body);
  }
  const a = await devSignIn(spec.browser, spec.pages, me, { base });
  await openConversation(a.page, conv.id);
  await eventually(async () => assert.deepEqual(await bodies(a.page), messages.map(([, body]) => body)));
  return { conv, a };
}

/** Asserts that none of devSignIn's records met a dialog or a page error. */
export function assertClean(...recs) {
  for (const r of recs) {
    assert.deepEqual(r.dialogs, [], `user ${r.uid}: unexpected dialogs`);
    assert.deepEqual(r.errors, [], `user ${r.uid}: page errors`);
  }
}

/** The end of a scenario: assertClean, then each person's context is closed. */
export async function finish(...recs) {
  assertClean(...recs);
  for (const r of recs) await r.context.close();
}

export const online = (page, timeout = 15000) => page.locator('[data-testid=connection][data-state=online]').waitFor({ timeout });

/** Waits until the page shows its connection is no longer online (the network was cut). */
export const offline = (page) => page.locator('[data-testid=connection]:not([data-state=online])').waitFor();

export const row = (page, cid) => page.locator(`[data-testid=conv-row][data-conv-id="${cid}"]`);

/** Opens a conversation from its inbox row and waits for its view. */
export async function openConversation(page, cid) {
  await eventually(async () => assert.equal(await row(page, cid).count(), 1));
  await row(page, cid).click();
  await page.locator(`[data-testid=conversation][data-conv-id="${cid}"]`).waitFor();
}

/** The unread badge of a conversation: its number, or 0 when absent. */
export async function unread(page, cid) {
  // One evaluation: the badge may be re-rendered between two calls.
  const text = await page.evaluate(
    (id) => document.querySelector(`[data-testid=conv-row][data-conv-id="${id}"] [data-testid=unread]`)?.textContent ?? '0',
    cid,
  );
  return Number(text);
}

/** Bodies of the messages on screen, top to bottom ("Message deleted" for tombstones). */
export const bodies = (page) => page.getByTestId('message-body').allTextContents();

/** Types text into the composer and sends it with Enter. */
export async function send(page, text) {
  await page.getByTestId('composer').fill(text);
  await page.getByTestId('composer').press('Enter');
}

/** The row of the message whose body is exactly text. */
export const bubble = (page, text) => page.locator('[data-testid=message]', { has: page.getByTestId('message-body').getByText(text, { exact: true }) });

/** Opens a message's actions menu (hover shows its button, as a mouse user does). */
export async function actions(page, text) {
  const m = bubble(page, text);
  await m.hover();
  await m.getByTestId('message-actions').click();
  const menu = page.getByTestId('message-menu');
  await menu.waitFor();
  return menu;
}
