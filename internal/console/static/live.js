// The admin console's live page: one activity's figures polled every
// second, charted over the last minutes from the polls, a shopper's or a
// device's last heartbeat, and a lock lookup.
// Loaded after app.js, whose helpers (api, $, fmtNum, …) it uses.
'use strict';

const POLL_MS = 1000;
const PAY_POLL_MS = 5000; // the payments' reconciliation asks the provider: less often
const WINDOW_MS = 5 * 60 * 1000; // the charts keep the last 5 minutes

// chart draws points ({t, v}) on svg as a line over the last WINDOW_MS and
// records how many it drew in data-points; caption gets the latest and the
// highest value.
function chart(svg, points, caption, unit) {
  const NS = 'http://www.w3.org/2000/svg';
  const W = 300, H = 100;
  svg.replaceChildren();
  svg.dataset.points = String(points.length);
  svg.dataset.from = points.length ? String(Math.round(points[0].t)) : '';
  const base = document.createElementNS(NS, 'line');
  base.setAttribute('x1', '0'); base.setAttribute('x2', String(W));
  base.setAttribute('y1', String(H)); base.setAttribute('y2', String(H));
  base.setAttribute('class', 'axis');
  svg.append(base);
  if (points.length === 0) {
    caption.textContent = '';
    return;
  }
  const now = points[points.length - 1].t;
  const from = Math.max(points[0].t, now - WINDOW_MS);
  const span = Math.max(now - from, 1);
  const top = Math.max(1, ...points.map((p) => p.v)) * 1.1;
  const xy = points.map((p) => [
    points.length === 1 ? W : ((p.t - from) / span) * W,
    H - (p.v / top) * H,
  ]);
  const line = xy.map(([x, y], i) => (i ? 'L' : 'M') + x.toFixed(1) + ',' + y.toFixed(1)).join(' ');
  const area = document.createElementNS(NS, 'path');
  area.setAttribute('d', line + ' L' + xy[xy.length - 1][0].toFixed(1) + ',' + H + ' L' + xy[0][0].toFixed(1) + ',' + H + ' Z');
  area.setAttribute('class', 'area');
  const path = document.createElementNS(NS, 'path');
  path.setAttribute('d', line);
  path.setAttribute('class', 'line');
  svg.append(area, path);
  const max = Math.max(...points.map((p) => p.v));
  caption.textContent = 'now ' + fmtNum(Math.round(points[points.length - 1].v)) + unit +
    ', max ' + fmtNum(Math.round(max)) + unit;
}

function showLive(id) {
  const root = mount('tpl-live');
  const el = (sel) => $(sel, root);
  const rates = []; // {t, v}: orders accepted per second between two polls
  const lags = [];  // {t, v}: persistence lag in ms
  let prev = null;  // the previous poll's {t, accepted}
  let current = null;
  let timer = 0;
  let stopped = false;
  leave = () => { stopped = true; clearTimeout(timer); };
  el('#live-edit').href = '#/activities/' + id + '/edit';

  const keep = (series, t, v) => {
    series.push({ t, v });
    while (series.length && series[0].t < t - WINDOW_MS) series.shift();
  };

  function render(a, presence, t) {
    current = a;
    el('#live-name').textContent = a.name;
    const badge = el('#live-status');
    badge.textContent = a.status;
    badge.dataset.status = a.status;
    el('#live-meta').textContent = '#' + a.id + ' ' + a.type + ' · ' + fmtTime(a.starts_at) + ' → ' + fmtTime(a.ends_at);
    el('#live-publish').hidden = a.status !== 'draft';
    el('#live-close').hidden = a.status !== 'published';
    el('#live-edit').hidden = a.status === 'closed';
    el('#live-draft').hidden = a.status !== 'draft';
    el('#live-updated').textContent = 'updated ' + new Date(t).toLocaleTimeString();
    el('#stock-remaining').textContent = fmtNum(a.stock_remaining);
    el('#stock-total').textContent = fmtNum(a.total_stock);
    el('#stock-meter').style.width = a.stock_remaining === null ? '0%'
      : Math.max(0, Math.min(100, (100 * a.stock_remaining) / a.total_stock)) + '%';
    el('#orders-accepted').textContent = fmtNum(a.orders_accepted);
    el('#orders-persisted').textContent = fmtNum(a.orders_persisted);
    el('#persistence-lag').textContent = a.persistence_lag_ms === null ? '—' : fmtNum(a.persistence_lag_ms) + ' ms';

    if (a.orders_accepted !== null) { // a draft has no live figures
      if (prev) keep(rates, t, Math.max(0, a.orders_accepted - prev.accepted) / Math.max((t - prev.t) / 1000, 0.001));
      prev = { t, accepted: a.orders_accepted };
      if (a.persistence_lag_ms !== null) keep(lags, t, a.persistence_lag_ms);
    }
    el('#orders-rate').textContent = rates.length ? fmtNum(Math.round(rates[rates.length - 1].v)) : '—';
    chart(el('#chart-rate'), rates, el('#rate-caption'), '/s');
    chart(el('#chart-lag'), lags, el('#lag-caption'), ' ms');

    const shards = a.stock_by_shard || [];
    el('#shards').hidden = shards.length === 0;
    el('#shards-rows').replaceChildren(...shards.map((s) => {
      const tr = document.createElement('tr');
      tr.dataset.shard = String(s.shard);
      const cell = (text, cls) => {
        const td = document.createElement('td');
        td.textContent = text;
        if (cls) td.className = cls;
        tr.appendChild(td);
        return td;
      };
      cell(String(s.shard));
      cell(fmtNum(s.remaining), 'num shard-left');
      cell(fmtNum(s.allotted), 'num');
      cell(fmtNum(s.orders_accepted), 'num');
      const meter = document.createElement('div');
      meter.className = 'meter';
      const bar = document.createElement('div');
      bar.style.width = (s.allotted > 0 ? Math.max(0, Math.min(100, (100 * s.remaining) / s.allotted)) : 0) + '%';
      meter.appendChild(bar);
      cell('').appendChild(meter);
      return tr;
    }));

    el('#groups').hidden = !a.groups;
    if (a.groups) {
      for (const k of ['forming', 'succeeded', 'failed']) el('#groups-' + k).textContent = fmtNum(a.groups[k] || 0);
    }
    // Orders on their way to MySQL within the grace are pending, not a
    // problem: the worker is catching up.
    const r = a.reconciliation;
    const state = el('#recon-state');
    const plural = (n, one, many) => fmtNum(n) + ' ' + (n === 1 ? one : many);
    if (r.state === 'problems') {
      state.textContent = plural(r.problems.length, 'problem', 'problems');
      state.dataset.status = 'problem';
    } else {
      state.textContent = r.state === 'in_sync' ? 'in sync' : 'pending persistence';
      state.dataset.status = r.state === 'in_sync' ? 'ok' : 'pending';
    }
    const units = r.pending.units;
    el('#recon-pending').textContent = r.pending.orders === 0 ? 'none' : plural(r.pending.orders, 'order', 'orders') +
      ' (' + (units > 0 ? '+' : '') + plural(units, 'unit', 'units') + ')';
    el('#sold-units').textContent = fmtNum(r.sold_units);
    el('#persisted-units').textContent = r.persisted_units < 0 ? 'unknown' : fmtNum(r.persisted_units);
    el('#recon-problems').replaceChildren(...r.problems.map((p) => {
      const li = document.createElement('li');
      li.textContent = p;
      return li;
    }));

    if (presence instanceof Error) {
      el('#online-now').textContent = '—';
      el('#watching').textContent = '—';
      el('#online-now').title = presence.message;
    } else {
      el('#online-now').textContent = fmtNum(presence.online);
      el('#watching').textContent = fmtNum(presence.activity ? presence.activity.watching : 0);
      el('#online-now').title = 'a heartbeat within ' + presence.ttl_seconds + ' s';
    }
  }

  // poll reads the figures and schedules the next read; one at a time (a
  // call while one is in flight does nothing: that one is about to render).
  let inFlight = false;
  async function poll() {
    if (stopped || inFlight) return;
    inFlight = true;
    clearTimeout(timer);
    const started = Date.now();
    let again = true;
    try {
      const [a, presence] = await Promise.all([
        api('GET', '/activities/' + id),
        api('GET', '/presence?activity_id=' + id).catch((e) => { if (e instanceof SignedOut) throw e; return e; }),
      ]);
      if (!stopped) {
        el('#live-error').textContent = '';
        render(a, presence, Date.now());
      }
    } catch (e) {
      if (e instanceof SignedOut) again = false;
      else if (!stopped) {
        failed(el('#live-error'), e);
        again = e.status !== 404 && e.status !== 400; // no such activity: nothing to poll
        if (again) el('#live-error').textContent += ' Retrying…';
      }
    } finally {
      inFlight = false;
    }
    if (again && !stopped) timer = setTimeout(poll, Math.max(0, POLL_MS - (Date.now() - started)));
  }

  for (const action of ['publish', 'close']) {
    el('#live-' + action).addEventListener('click', async () => {
      if (!current) return;
      if (await transition(current, action, el('#live-error'))) poll();
    });
  }

  el('#seen-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const kind = el('#seen-kind').value; // user_id or device_id
    const who = el('#seen-id').value.trim();
    const msg = el('#seen-message');
    const dl = el('#seen-client');
    dl.hidden = true;
    if (!who) {
      msg.textContent = kind === 'user_id' ? 'Enter a user id.' : 'Enter a device id.';
      return;
    }
    msg.textContent = 'Looking up…';
    try {
      const p = await api('GET', '/presence?' + new URLSearchParams({ [kind]: who }));
      const c = p.client;
      const name = (kind === 'user_id' ? 'User ' : 'Device ') + who;
      if (!c.last_seen) {
        msg.textContent = name + ' sent no heartbeat in the last ' + p.ttl_seconds + ' s.';
        return;
      }
      msg.textContent = name + ':';
      el('#seen-online').textContent = c.online ? 'yes' : 'no';
      el('#seen-online').dataset.online = String(c.online);
      el('#seen-last').textContent = fmtTime(c.last_seen);
      el('#seen-last').dataset.iso = c.last_seen;
      dl.hidden = false;
    } catch (e) {
      failed(msg, e);
    }
  });
  el('#seen-kind').addEventListener('change', () => {
    el('#seen-id').placeholder = el('#seen-kind').value === 'user_id' ? '1001' : 'kiosk-7';
  });

  // payments polls the sale's reconciliation against the provider every
  // PAY_POLL_MS: slower than the figures, since each asks the provider.
  let payTimer = 0;
  async function payments() {
    if (stopped) return;
    try {
      const r = await api('GET', '/activities/' + id + '/payments');
      el('#pay-error').textContent = '';
      const state = el('#pay-state');
      state.textContent = r.in_sync ? 'in sync' : 'look at it';
      state.dataset.status = r.in_sync ? 'ok' : 'problem';
      el('#pay-provider').textContent = r.provider;
      el('#pay-at-provider').textContent = fmtNum(r.at_provider);
      el('#pay-recorded').textContent = fmtNum(r.recorded);
      el('#pay-missing').textContent = fmtNum(r.missing.length);
      el('#pay-differ').textContent = fmtNum(r.amount_differs.length);
      el('#pay-refunds-pending').textContent = fmtNum(r.refunds_pending.length);
      el('#pay-flagged').textContent = fmtNum(r.flagged.length) + (r.flagged.length
        ? ' (' + r.flagged.filter((p) => p.refund_id).length + ' refunded)' : '');
    } catch (e) {
      if (e instanceof SignedOut) return;
      failed(el('#pay-error'), e);
    }
    if (!stopped) payTimer = setTimeout(payments, PAY_POLL_MS);
  }
  const stopPolls = leave;
  leave = () => { stopPolls(); clearTimeout(payTimer); };

  el('#order-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const no = el('#order-no').value.trim();
    const msg = el('#order-message');
    const dl = el('#order-payment');
    dl.hidden = true;
    if (!no) {
      msg.textContent = 'Enter an order number.';
      return;
    }
    msg.textContent = 'Looking up…';
    try {
      const v = await api('GET', '/orders/' + encodeURIComponent(no));
      msg.textContent = 'Order ' + no + ' (user ' + v.user_id + '):';
      el('#order-status').textContent = v.order.status;
      el('#order-paid-by').textContent = v.payment_id || '—';
      el('#order-payments').replaceChildren(...(v.payments.length ? v.payments : (v.live_payment ? [v.live_payment] : [])).map((p) => {
        const div = document.createElement('div');
        div.textContent = p.id + ': ' + p.status + ', ' + fmtNum(p.amount_cents) + ' ' + p.currency +
          (p.flag ? ', flagged ' + p.flag : '') + (p.refund_id ? ', refunded (' + p.refund_id + ')' : '');
        return div;
      }));
      if (!el('#order-payments').childElementCount) el('#order-payments').textContent = 'none';
      dl.hidden = false;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) msg.textContent = 'No order ' + no + '.';
      else failed(msg, e);
    }
  });

  el('#lock-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const name = el('#lock-name').value.trim();
    const msg = el('#lock-message');
    const dl = el('#lock-holder');
    dl.hidden = true;
    if (!name) {
      msg.textContent = 'Enter a lock name.';
      return;
    }
    msg.textContent = 'Looking up…';
    try {
      const h = await api('GET', '/locks/' + encodeURIComponent(name));
      msg.textContent = 'Held:';
      el('#lock-owner').textContent = h.owner;
      el('#lock-fence').textContent = String(h.fence);
      el('#lock-host').textContent = h.host;
      el('#lock-pid').textContent = String(h.pid);
      el('#lock-label').textContent = h.label || '—';
      el('#lock-acquired').textContent = fmtTime(h.acquired_at);
      el('#lock-ttl').textContent = fmtNum(h.ttl_ms) + ' ms';
      dl.hidden = false;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) msg.textContent = 'Nobody holds ' + name + '.';
      else failed(msg, e);
    }
  });

  // history seeds the charts with the sale's last minutes, as the worker
  // sampled them (GET …/series), so a console opened on a running sale
  // does not start empty; the polls go on from there. The samples carry
  // the server's clock: moved back if it is ahead of this browser's, so
  // the line never runs backwards into the polls'.
  async function history() {
    try {
      const r = await api('GET', '/activities/' + id + '/series?minutes=5');
      const ss = r.samples.map((x) => ({ t: Date.parse(x.t), accepted: x.orders_accepted, lag: x.persistence_lag_ms }));
      if (!ss.length) return;
      const shift = Math.min(0, Date.now() - ss[ss.length - 1].t);
      for (let i = 0; i < ss.length; i++) {
        const t = ss[i].t + shift;
        if (i > 0) {
          const dt = (ss[i].t - ss[i - 1].t) / 1000;
          if (dt > 0) keep(rates, t, Math.max(0, ss[i].accepted - ss[i - 1].accepted) / dt);
        }
        keep(lags, t, ss[i].lag);
      }
      const last = ss[ss.length - 1];
      prev = { t: last.t + shift, accepted: last.accepted };
    } catch (e) {
      if (e instanceof SignedOut) throw e;
      // No history (an older api, Redis away): the charts start empty, as before.
    }
  }

  history().then(poll, () => {});
  payments();
}
