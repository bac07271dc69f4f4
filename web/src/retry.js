// chatd's rate-limit hint: a refusal for a rate limit says in how many
// whole seconds a retry can succeed (a PUBACK's or CONNACK's user property
// retryAfter, HTTP's Retry-After, docs/protocol.md "Rate limits").

/**
 * The seconds a retryAfter hint (a string or number) asks for: a positive
 * whole number, else 0 (none given, or not one). An HTTP date (a proxy's
 * Retry-After may be one) counts the whole seconds until then.
 */
export function retryAfterSeconds(v) {
  const t = String(v ?? '').trim();
  let s = typeof v === 'number' ? v : /^\d+$/.test(t) ? Number(t) : NaN;
  if (Number.isNaN(s) && /[a-z]/i.test(t)) s = Math.ceil((Date.parse(t) - Date.now()) / 1000);
  return Number.isSafeInteger(s) && s > 0 ? s : 0;
}

/**
 * The wait (ms) before a retry that hint s (seconds) asks for: at least
 * that long, and up to a quarter more at random, so the clients a limit
 * refused at the same moment do not all come back in the same instant.
 * 0 without a hint: the caller's own backoff decides.
 */
export function retryAfterDelay(s) {
  return s > 0 ? s * 1000 * (1 + Math.random() / 4) : 0;
}

/**
 * The pause (ms) before retry n (1, 2, ...) of a run of failures that
 * gave no hint: baseMs doubling up to capMs, give or take a quarter at
 * random, so clients that failed together spread out.
 */
export function backoffDelay(n, baseMs, capMs) {
  return Math.min(baseMs * 2 ** (n - 1), capMs) * (0.75 + Math.random() / 2);
}
