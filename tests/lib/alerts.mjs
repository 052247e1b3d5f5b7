// Helpers of the alert scenario tests (t6101, t6102): a daemon configuration
// with short thresholds, a sink for the operational events, and waits on the
// alerts API.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { waitFor } from './harness.mjs';

/** Short thresholds, so each rule opens and resolves within seconds. */
export const ALERT_ENV = {
  HOOKD_ALERTS_ENABLED: 'true',
  HOOKD_ALERTS_INTERVAL: '150ms',
  HOOKD_ALERTS_WINDOW: '2500ms',
  HOOKD_ALERTS_REOPEN_AFTER: '0s',
  HOOKD_ALERTS_BACKLOG_GROWTH: '3',
  HOOKD_ALERTS_ERROR_RATE: '0.5',
  HOOKD_ALERTS_ERROR_MIN_ATTEMPTS: '3',
  HOOKD_ALERTS_NO_SUCCESS_ACCOUNTS: '2',
  HOOKD_ALERTS_DEAD_LETTERS: '1',
  HOOKD_ALERTS_QUARANTINED: '1',
  HOOKD_ALERTS_SIGNATURE_REJECTIONS: '3',
  HOOKD_DELIVERY_SYNC_WARN_AFTER: '1s',
  HOOKD_DELIVERY_BREAKER_FAILURES: '0',
  HOOKD_SERVER_METRICS_REFRESH: '0s',
};

/** The alerts of rule (and subject) in status, via the API of d. */
export async function alertsOf(d, rule, { subject, status } = {}) {
  const q = new URLSearchParams({ rule, limit: '1000', ...(status ? { status } : {}) });
  const r = await d.api('GET', `/v1/alerts?${q}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.data.filter((a) => subject === undefined || a.subject === subject);
}

export async function waitAlert(d, rule, subject, status, timeoutMs = 12000) {
  return waitFor(async () => (await alertsOf(d, rule, { subject, status }))[0],
    { timeoutMs, intervalMs: 50, what: `alert ${rule}/${subject} ${status}` });
}

/** The operational events a recording sink got, parsed: {type, id, data}. */
export function opsEvents(sink, path = '/ops') {
  return sink.at(path).map((r) => ({ webhookId: r.headers['webhook-id'], ...JSON.parse(r.body) }));
}

export async function waitOpsEvent(sink, type, alertId, timeoutMs = 12000) {
  return waitFor(() => opsEvents(sink).find((e) => e.type === type && e.data.id === alertId),
    { timeoutMs, intervalMs: 50, what: `${type} of ${alertId} at the subscribed endpoint` });
}

export function sign(secret, id, ts, body) {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  return 'v1,' + createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64');
}

/** POSTs a Standard Webhooks request to /in/{source}; bad: a signature that does not match. */
export async function sendInbound(d, source, secret, id, { bad = false } = {}) {
  const body = JSON.stringify({ type: 'order.paid', data: { id } });
  const ts = Math.floor(Date.now() / 1000);
  const res = await fetch(`http://127.0.0.1:${d.publicPort}/in/${source}`, {
    method: 'POST', body,
    headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(ts),
      'webhook-signature': sign(secret, id, ts, bad ? body + ' ' : body) },
  });
  await res.text();
  return res.status;
}
