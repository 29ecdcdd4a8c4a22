// The console's webhook endpoints (docs/webhooks.md): the list, a new
// endpoint (its secret shown once), on and off, a new secret, delete, and
// an endpoint's delivery log with redelivery. Plain JS on app.js's client
// (api, view, failed, confirmAction, fmtTime, routes): data from the API
// reaches the page only through textContent and attributes, and the views
// are built element by element (h), no markup parsed.
'use strict';

const HOOK_TYPES = ['order.accepted', 'order.paid', 'order.cancelled', 'order.refunded', 'group.succeeded',
  'group.failed', 'activity.sold_out', 'activity.paused', 'activity.resumed', 'activity.closed', 'payment.flagged'];
const HOOK_PAGE_SIZE = 20;

// h makes an element: its tag with classes and an id ("tr", "td.h-id",
// "section#hooks.card"), attributes, and children (elements, or strings as
// text). The pages are built with it: no markup is ever parsed.
function h(spec, attrs, ...children) {
  const [, tag, id, cls] = spec.match(/^([a-z0-9]+)(?:#([\w-]+))?((?:\.[\w-]+)*)$/);
  const el = document.createElement(tag);
  if (id) el.id = id;
  if (cls) el.className = cls.slice(1).replaceAll('.', ' ');
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'hidden') el.hidden = v;
    else el.setAttribute(k, v);
  }
  el.append(...children);
  return el;
}

// The views, built fresh each time.
const hookViews = {
  list: () => h('section#hooks', {},
    h('div.bar', {}, h('h1', {}, 'Webhook endpoints')),
    h('p.hint', {}, "The shop's systems are sent every order event they subscribe to, signed (Standard Webhooks), at least once, retried for more than a day."),
    h('p#hooks-error.error', { role: 'alert' }),
    h('section#hook-secret-box.card', { hidden: true },
      h('h2#hook-secret-title', {}, 'Signing secret'),
      h('p', {}, 'Copy it now into the receiver: it is not shown again.'),
      h('p', {}, h('code#hook-secret')),
      h('p#hook-secret-note.hint'),
      h('div.actions', {}, h('button#hook-secret-done', { type: 'button' }, 'Done'))),
    h('table#hook-list', {},
      h('thead', {}, h('tr', {}, ...['ID', 'URL', 'Events', 'State', ''].map((c) => h('th', {}, c)))),
      h('tbody')),
    h('p#hooks-empty.hint', { hidden: true }, 'No endpoints yet.'),
    h('section#hook-new.card', {},
      h('h2', {}, 'New endpoint'),
      h('form#hook-form', { novalidate: '' },
        h('div.fields', {},
          h('div.field', {}, h('label', { for: 'h-url' }, 'URL'),
            h('input#h-url', { name: 'url', type: 'url', spellcheck: 'false', placeholder: 'https://warehouse.example/hooks' }),
            h('p#herr-url.field-error')),
          h('div.field', {}, h('label', { for: 'h-description' }, 'Description'),
            h('input#h-description', { name: 'description', type: 'text', maxlength: '255' }),
            h('p#herr-description.field-error'))),
        h('fieldset#h-events', {}, h('legend', {}, 'Events'),
          h('label.check', {}, h('input#h-all', { type: 'checkbox', value: '*', checked: '' }), ' every event')),
        h('p#herr-events.field-error'),
        h('p#hook-form-error.error', { role: 'alert' }),
        h('div.actions', {}, h('button#hook-create.primary', { type: 'submit' }, 'Create endpoint'))))),
  row: () => h('tr', {},
    h('td.h-id', { 'data-label': 'ID' }),
    h('td.h-url', { 'data-label': 'URL' }),
    h('td.h-events', { 'data-label': 'Events' }),
    h('td', { 'data-label': 'State' }, h('span.badge.h-state')),
    h('td.c-actions', {},
      h('a.h-log', {}, 'Deliveries'),
      h('button.h-toggle', { type: 'button' }),
      h('button.h-rotate', { type: 'button' }, 'New secret'),
      h('button.h-delete.danger', { type: 'button' }, 'Delete'))),
  log: () => h('section#hook-log', {},
    h('div.bar', {},
      h('h1', {}, 'Deliveries to ', h('span#log-url'), ' ', h('span#log-state.badge')),
      h('a.button', { href: '#/webhooks' }, 'All endpoints')),
    h('p.hint', {}, 'Every attempt, newest first. A redelivery sends the event again with its id, as a delivery of its own.'),
    h('form#recover-form.bar', {},
      h('label', { for: 'recover-since' }, 'Send again every event since '),
      h('input#recover-since', { type: 'datetime-local', required: true }),
      h('button#recover', { type: 'submit' }, 'Recover')),
    h('p#log-error.error', { role: 'alert' }),
    h('p#log-message', { role: 'status' }),
    h('table#log-rows', {},
      h('thead', {}, h('tr', {}, ...['When', 'Event', 'Type', 'Attempt', 'Status', 'Latency', 'Outcome', ''].map((c) => h('th', {}, c)))),
      h('tbody')),
    h('p#log-empty.hint', { hidden: true }, 'No attempts yet.'),
    h('div.pager', {},
      h('button#log-prev', { type: 'button' }, 'Previous'),
      h('span#log-page'),
      h('button#log-next', { type: 'button' }, 'Next'))),
  logRow: () => h('tr', {},
    h('td.l-at', { 'data-label': 'When' }),
    h('td', { 'data-label': 'Event' }, h('code.l-event')),
    h('td.l-type', { 'data-label': 'Type' }),
    h('td.l-attempt.num', { 'data-label': 'Attempt' }),
    h('td.l-status.num', { 'data-label': 'Status' }),
    h('td.l-latency.num', { 'data-label': 'Latency' }),
    h('td', { 'data-label': 'Outcome' }, h('span.badge.l-outcome')),
    h('td.c-actions', {}, h('button.l-redeliver', { type: 'button' }, 'Redeliver'))),
};

// mountView replaces the view with el and returns it.
function mountView(el) {
  view().replaceChildren(el);
  return el;
}

routes.push([/^#\/webhooks$/, () => showHooks()]);
routes.push([/^#\/webhooks\/(\d+)(?:\?page=(\d+))?$/, (m) => showHookLog(m[1], parseInt(m[2] || '1', 10) || 1)]);

// hookState is an endpoint's state for its badge: on, off, or turned off
// by the worker after a whole retry schedule failed.
function hookState(ep) {
  if (ep.enabled) return ['enabled', 'ok'];
  return ep.disabled_reason === 'failing' ? ['disabled: failing', 'problem'] : ['disabled', 'pending'];
}

// showSecret shows a secret made just now, once.
function showSecret(root, title, secret, note) {
  $('#hook-secret-title', root).textContent = title;
  $('#hook-secret', root).textContent = secret;
  $('#hook-secret-note', root).textContent = note || '';
  $('#hook-secret-box', root).hidden = false;
}

async function showHooks(secret) {
  const root = mountView(hookViews.list());
  const err = $('#hooks-error', root);
  $('#hook-secret-done', root).addEventListener('click', () => { $('#hook-secret-box', root).hidden = true; });
  if (secret) showSecret(root, secret.title, secret.value, secret.note);

  const boxes = $('#h-events', root);
  for (const t of HOOK_TYPES) {
    const label = document.createElement('label');
    label.className = 'check';
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.value = t;
    box.className = 'h-type';
    label.append(box, ' ' + t);
    boxes.append(label);
  }
  const all = $('#h-all', root);
  const sync = () => root.querySelectorAll('.h-type').forEach((b) => { b.disabled = all.checked; });
  all.addEventListener('change', sync);
  sync();

  const form = $('#hook-form', root);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    for (const f of ['url', 'description', 'events']) $('#herr-' + f, root).textContent = '';
    $('#hook-form-error', root).textContent = '';
    const events = all.checked ? ['*'] : [...root.querySelectorAll('.h-type:checked')].map((b) => b.value);
    const body = { url: $('#h-url', root).value.trim(), events, description: $('#h-description', root).value };
    try {
      const ep = await api('POST', '/webhook-endpoints', body);
      showHooks({ title: 'Signing secret of endpoint ' + ep.id, value: ep.secret });
    } catch (e) {
      const at = e.field && root.querySelector('#herr-' + CSS.escape(e.field));
      if (at) at.textContent = e.message;
      else failed($('#hook-form-error', root), e);
    }
  });

  let data;
  try {
    // The list is paged (20 by default); a shop has a handful: the first 100.
    data = await api('GET', '/webhook-endpoints?page_size=100');
  } catch (e) {
    failed(err, e);
    return;
  }
  $('#hooks-empty', root).hidden = data.items.length > 0;
  const tbody = $('#hook-list tbody', root);
  for (const ep of data.items) {
    const row = hookViews.row();
    row.dataset.id = ep.id;
    $('.h-id', row).textContent = ep.id;
    $('.h-url', row).textContent = ep.url;
    $('.h-events', row).textContent = ep.events.join(', ');
    const [label, status] = hookState(ep);
    const badge = $('.h-state', row);
    badge.textContent = label;
    badge.dataset.status = status;
    $('.h-log', row).href = '#/webhooks/' + ep.id;
    const toggle = $('.h-toggle', row);
    toggle.textContent = ep.enabled ? 'Disable' : 'Enable';
    toggle.addEventListener('click', async () => {
      try {
        await api('PATCH', '/webhook-endpoints/' + ep.id, { enabled: !ep.enabled });
        route();
      } catch (e) { failed(err, e); }
    });
    $('.h-rotate', row).addEventListener('click', async () => {
      if (!(await confirmAction('Make a new signing secret for ' + ep.url + '? The current one still signs for the rotation window.', 'New secret'))) return;
      try {
        const r = await api('POST', '/webhook-endpoints/' + ep.id + '/rotate-secret');
        showHooks({ title: 'New signing secret of endpoint ' + ep.id, value: r.secret,
          note: 'The previous secret signs too until ' + fmtTime(r.previous_secret_expires_at) + '.' });
      } catch (e) { failed(err, e); }
    });
    $('.h-delete', row).addEventListener('click', async () => {
      if (!(await confirmAction('Delete the endpoint ' + ep.url + '? Its deliveries stop and its log is removed.', 'Delete'))) return;
      try {
        await api('DELETE', '/webhook-endpoints/' + ep.id);
        route();
      } catch (e) { failed(err, e); }
    });
    tbody.append(row);
  }
}

async function showHookLog(id, page) {
  const root = mountView(hookViews.log());
  const err = $('#log-error', root);
  let ep;
  let data;
  try {
    ep = await api('GET', '/webhook-endpoints/' + id);
    const q = new URLSearchParams({ page: String(page), page_size: String(HOOK_PAGE_SIZE) });
    data = await api('GET', '/webhook-endpoints/' + id + '/deliveries?' + q);
  } catch (e) {
    failed(err, e);
    return;
  }
  $('#log-url', root).textContent = ep.url;
  const [label, status] = hookState(ep);
  $('#log-state', root).textContent = label;
  $('#log-state', root).dataset.status = status;
  const pages = Math.max(1, Math.ceil(data.total / data.page_size));
  $('#log-page', root).textContent = 'page ' + data.page + ' of ' + pages;
  $('#log-prev', root).disabled = page <= 1;
  $('#log-next', root).disabled = page >= pages;
  $('#log-prev', root).addEventListener('click', () => { location.hash = '#/webhooks/' + id + '?page=' + (page - 1); });
  $('#log-next', root).addEventListener('click', () => { location.hash = '#/webhooks/' + id + '?page=' + (page + 1); });
  // A recovery (after an outage): every event since then of the types it
  // subscribes to, queued again; the same one twice does not double what waits.
  $('#recover-form', root).addEventListener('submit', async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const since = new Date($('#recover-since', root).value);
    if (Number.isNaN(since.getTime())) return;
    try {
      const r = await api('POST', '/webhook-endpoints/' + id + '/recover', { since: since.toISOString() });
      $('#log-message', root).textContent = 'Queued again: ' + r.events + ' events since ' + fmtTime(r.since) + '.';
    } catch (e) { failed(err, e); }
  });
  $('#log-empty', root).hidden = data.items.length > 0;
  const tbody = $('#log-rows tbody', root);
  for (const a of data.items) {
    const row = hookViews.logRow();
    row.dataset.event = a.event_id;
    $('.l-at', row).textContent = fmtTime(a.attempted_at);
    $('.l-event', row).textContent = a.event_id;
    $('.l-type', row).textContent = a.type + (a.manual ? ' (redelivery)' : '');
    $('.l-attempt', row).textContent = a.attempt;
    $('.l-status', row).textContent = a.http_status || 'none';
    $('.l-latency', row).textContent = a.latency_ms.toFixed(1) + ' ms';
    const out = $('.l-outcome', row);
    out.textContent = a.delivered ? 'delivered' : (a.last ? 'failed, last' : 'failed, retrying');
    out.dataset.status = a.delivered ? 'ok' : (a.last ? 'problem' : 'pending');
    out.title = a.error;
    $('.l-redeliver', row).addEventListener('click', async () => {
      try {
        await api('POST', '/webhook-endpoints/' + id + '/events/' + encodeURIComponent(a.event_id) + '/redeliver');
        $('#log-message', root).textContent = 'Sent again: ' + a.event_id + '.';
      } catch (e) { failed(err, e); }
    });
    tbody.append(row);
  }
}
