// The admin console's live page: one activity's figures polled every
// second, item by item too, charted over the last minutes from the polls;
// restock, pause and resume; a shopper's or a device's last heartbeat, and
// a lock lookup.
// Loaded after app.js, whose helpers (api, $, fmtNum, …) it uses.
'use strict';

const POLL_MS = 1000;
const PAY_POLL_MS = 5000; // the payments' reconciliation asks the provider: less often
const WINDOW_MS = 5 * 60 * 1000; // the charts keep the last 5 minutes

const NS = 'http://www.w3.org/2000/svg';
const MIN_SPAN_MS = 60 * 1000; // the time axis spans a minute at least
const AGE_STEPS_S = [5, 10, 15, 30, 60, 120, 300]; // the time ticks' round steps

// svgEl makes an SVG element with attrs and, if given, text.
function svgEl(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// niceStep is the round step (1, 2, 2.5 or 5 times a power of ten; a whole
// number) that divides 0 … max into at most n parts.
function niceStep(max, n) {
  const raw = Math.max(max / n, 1);
  const p = 10 ** Math.floor(Math.log10(raw));
  return (p >= 10 ? [1, 2, 2.5, 5, 10] : [1, 2, 5, 10]).find((m) => m * p >= raw) * p;
}

// fmtTick writes a value tick short, in the reader's locale: 900, 1.5K, 40K.
const fmtTick = new Intl.NumberFormat(undefined, { notation: 'compact', maximumSignificantDigits: 3 }).format;

// fmtAge writes a time tick s seconds before the last point: now, -15s,
// -90s, -2m, -2m30s.
function fmtAge(s) {
  if (s === 0) return 'now';
  if (s % 60 === 0) return '-' + s / 60 + 'm';
  return '-' + (s < 120 ? s + 's' : Math.floor(s / 60) + 'm' + (s % 60) + 's');
}

// chart draws points ({t, v}) on svg as a line over the last WINDOW_MS,
// with a value axis of round ticks from 0 up to at least the highest value,
// in the unit of svg's data-unit, and a time axis of ages up to "now" (the
// last point); it spans a minute at least, so a new page's first seconds
// read as seconds. It draws in the svg's own pixels, so the labels keep
// their size at any width: call it again when that changes. It records how
// many points it drew in data-points; caption gets the latest and the
// highest value.
function chart(svg, points, caption, unit) {
  const box = svg.getBoundingClientRect();
  const W = Math.round(box.width) || 300, H = Math.round(box.height) || 160; // 0: not laid out yet
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  svg.replaceChildren();
  svg.dataset.points = String(points.length);
  svg.dataset.from = points.length ? String(Math.round(points[0].t)) : '';
  const now = points.length ? points[points.length - 1].t : Date.now();
  const span = Math.min(Math.max(now - (points.length ? points[0].t : now), MIN_SPAN_MS), WINDOW_MS);
  const max = points.length ? Math.max(...points.map((p) => p.v)) : 0;

  // The value ticks' labels first: the widest sets the left margin.
  const step = niceStep(max, 5);
  const top = Math.max(1, Math.ceil(max / step)) * step;
  const yAxis = svgEl('g', { class: 'y-axis' });
  yAxis.append(svgEl('text', { class: 'unit', x: 0, y: 11 }, svg.dataset.unit));
  svg.append(yAxis);
  const yTicks = [];
  for (let k = 0; k * step <= top; k++) {
    const g = svgEl('g', { class: 'tick', 'data-value': k * step });
    const label = svgEl('text', { 'text-anchor': 'end', 'dominant-baseline': 'middle' }, fmtTick(k * step));
    g.append(label);
    yAxis.append(g);
    yTicks.push({ g, label, v: k * step });
  }
  const L = Math.ceil(Math.max(...yTicks.map((tk) => tk.label.getComputedTextLength()))) + 8;
  const R = W - 2, T = 24, B = H - 20;
  const x = (t) => L + ((t - (now - span)) / span) * (R - L);
  const y = (v) => B - (v / top) * (B - T);
  for (const tk of yTicks) {
    tk.g.prepend(svgEl('line', { class: tk.v ? 'grid' : 'axis', x1: L, x2: R, y1: y(tk.v), y2: y(tk.v) }));
    tk.label.setAttribute('x', String(L - 5));
    tk.label.setAttribute('y', String(y(tk.v)));
  }
  yAxis.append(svgEl('line', { class: 'axis', x1: L, x2: L, y1: T, y2: B }));

  // The time ticks: a round step that leaves 55 px or more between them.
  const most = Math.min(6, Math.max(2, Math.floor((R - L) / 55)));
  const age = AGE_STEPS_S.find((s) => span / 1000 / s <= most) || AGE_STEPS_S[AGE_STEPS_S.length - 1];
  const xAxis = svgEl('g', { class: 'x-axis' });
  for (let k = Math.floor(span / 1000 / age); k >= 0; k--) { // from the left
    const at = x(now - k * age * 1000);
    const anchor = k === 0 ? 'end' : at - L < 20 ? 'start' : 'middle';
    const g = svgEl('g', { class: 'tick', 'data-age': k * age });
    g.append(svgEl('line', { class: 'axis', x1: at, x2: at, y1: B, y2: B + 4 }),
      svgEl('text', { x: k === 0 ? R : at, y: H - 4, 'text-anchor': anchor }, fmtAge(k * age)));
    xAxis.append(g);
  }
  svg.append(xAxis);

  if (points.length === 0) {
    caption.textContent = '';
    return;
  }
  const xy = points.map((p) => [x(p.t), y(p.v)]);
  const line = xy.map(([px, py], i) => (i ? 'L' : 'M') + px.toFixed(1) + ',' + py.toFixed(1)).join(' ');
  const area = svgEl('path', {
    class: 'area',
    d: line + ' L' + xy[xy.length - 1][0].toFixed(1) + ',' + B + ' L' + xy[0][0].toFixed(1) + ',' + B + ' Z',
  });
  svg.append(area, svgEl('path', { class: 'line', d: line }));
  caption.textContent = 'now ' + fmtNum(Math.round(points[points.length - 1].v)) + unit +
    ', max ' + fmtNum(Math.round(max)) + unit;
}

// fit shrinks a figure's value until it fits its card on one line (a sale
// of millions on a phone) and lets it grow back when there is room.
function fit(value) {
  value.style.fontSize = '';
  for (let i = 0; i < 4 && value.scrollWidth > value.clientWidth; i++) {
    const size = parseFloat(getComputedStyle(value).fontSize);
    value.style.fontSize = Math.floor((10 * size * value.clientWidth) / value.scrollWidth - 5) / 10 + 'px';
  }
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
  leave = () => { stopped = true; clearTimeout(timer); removeEventListener('resize', draw); };
  el('#live-edit').href = '#/activities/' + id + '/edit';

  const keep = (series, t, v) => {
    series.push({ t, v });
    while (series.length && series[0].t < t - WINDOW_MS) series.shift();
  };

  // draw charts the series and fits the figures to the page's width: after
  // every poll, and when the width changes.
  function draw() {
    chart(el('#chart-rate'), rates, el('#rate-caption'), '/s');
    chart(el('#chart-lag'), lags, el('#lag-caption'), '\u00a0ms'); // no break before the unit
    for (const value of root.querySelectorAll('.figure .value')) fit(value);
  }
  addEventListener('resize', draw);

  function render(a, presence, t) {
    current = a;
    el('#live-name').textContent = a.name;
    const badge = el('#live-status');
    badge.textContent = a.status;
    badge.dataset.status = a.status;
    el('#live-meta').textContent = '#' + a.id + ' ' + a.type + ' · ' + fmtTime(a.starts_at) + ' → ' + fmtTime(a.ends_at);
    el('#live-publish').hidden = a.status !== 'draft';
    el('#live-close').hidden = a.status !== 'published';
    el('#live-pause').hidden = a.status !== 'published' || a.paused;
    el('#live-resume').hidden = a.status !== 'published' || !a.paused;
    el('#live-paused').hidden = !a.paused;
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
    draw();

    // The waiting room: its figures, and the rate form (published sales).
    const q = a.queue;
    el('#queue-live').hidden = !a.waiting_room || a.status === 'draft';
    el('#admit-form').hidden = !a.waiting_room || a.status !== 'published';
    if (q) {
      el('#queue-waiting').textContent = fmtNum(q.waiting);
      el('#queue-admitted').textContent = fmtNum(q.admitted);
      el('#queue-joined').textContent = fmtNum(q.joined);
      el('#queue-rate').textContent = fmtNum(Math.round(q.admitted_per_second));
      el('#queue-wait').textContent = q.estimated_wait_seconds < 0 ? (a.paused ? 'paused' : '—')
        : q.estimated_wait_seconds < 120 ? q.estimated_wait_seconds + ' s' : Math.round(q.estimated_wait_seconds / 60) + ' min';
    }
    el('#queue-rate-set').textContent = a.waiting_room ? fmtNum(a.admit_per_second) + '/s' : '—';

    // Stock item by item, and the restock form's items (built once, so a
    // poll does not undo what is chosen).
    const items = a.items || [];
    el('#items-live').hidden = a.status === 'draft' || items.length === 0;
    el('#restock-form').hidden = a.status !== 'published';
    el('#items-live-rows').replaceChildren(...items.map((it) => {
      const tr = document.createElement('tr');
      tr.dataset.sku = it.sku;
      const cell = (text, cls) => {
        const td = document.createElement('td');
        td.textContent = text;
        if (cls) td.className = cls;
        tr.appendChild(td);
        return td;
      };
      cell(it.sku);
      cell(it.label || '—');
      cell(fmtNum(it.price_cents), 'num');
      cell(fmtNum(it.stock_remaining), 'num item-left');
      cell(fmtNum(it.stock), 'num item-stock');
      cell(fmtNum(it.sold), 'num item-sold');
      const meter = document.createElement('div');
      meter.className = 'meter';
      const bar = document.createElement('div');
      bar.style.width = (it.stock > 0 && it.stock_remaining !== null ? Math.max(0, Math.min(100, (100 * it.stock_remaining) / it.stock)) : 0) + '%';
      meter.appendChild(bar);
      cell('').appendChild(meter);
      return tr;
    }));
    const pick = el('#restock-item');
    if (pick.options.length !== items.length) {
      pick.replaceChildren(...items.map((it) => {
        const o = document.createElement('option');
        o.value = it.sku;
        o.textContent = it.sku + (it.label ? ' — ' + it.label : '');
        return o;
      }));
    }

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
    const unread = r.pending.unread ? ' of ' + fmtNum(r.pending.orders - r.pending.unread) + ' read' : '';
    el('#recon-pending').textContent = r.pending.orders === 0 ? 'none' : plural(r.pending.orders, 'order', 'orders') +
      ' (' + (units > 0 ? '+' : '') + plural(units, 'unit', 'units') + unread + ')';
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
  // Pause and resume need no confirmation: each undoes the other.
  for (const action of ['pause', 'resume']) {
    el('#live-' + action).addEventListener('click', async () => {
      el('#live-error').textContent = '';
      try {
        await api('POST', '/activities/' + id + '/' + action);
        poll();
      } catch (e) {
        failed(el('#live-error'), e);
      }
    });
  }

  el('#admit-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const msg = el('#admit-message');
    const raw = el('#admit-rate').value.trim();
    const rate = Number(raw);
    if (raw === '' || !Number.isInteger(rate) || rate < 1) {
      msg.textContent = 'Enter how many shoppers to let in a second: a whole number, 1 or more.';
      return;
    }
    msg.textContent = 'Setting…';
    try {
      const r = await api('PATCH', '/activities/' + id, { admit_per_second: rate });
      msg.textContent = 'Letting in ' + fmtNum(r.admit_per_second) + ' a second from now.';
      el('#admit-rate').value = '';
      poll();
    } catch (e) {
      failed(msg, e);
    }
  });

  el('#restock-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const msg = el('#restock-message');
    const sku = el('#restock-item').value;
    const raw = el('#restock-add').value.trim();
    const add = Number(raw);
    if (!sku || raw === '' || !Number.isInteger(add) || add === 0) {
      msg.textContent = 'Enter the units to add: a whole number, not 0 (negative removes unsold units).';
      return;
    }
    if (add < 0 && !(await confirmAction('Remove ' + fmtNum(-add) + ' unsold units of ' + sku + '?', 'Remove'))) return;
    msg.textContent = 'Restocking…';
    try {
      const r = await api('POST', '/activities/' + id + '/stock', { item: sku, add });
      msg.textContent = (add > 0 ? 'Added ' + fmtNum(add) : 'Removed ' + fmtNum(-add)) + ' of ' + sku + ': its stock is ' +
        fmtNum(r.change.stock_after) + ' (version ' + r.change.version + ').';
      el('#restock-add').value = '';
      poll();
    } catch (e) {
      failed(msg, e);
    }
  });

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
