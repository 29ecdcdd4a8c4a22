// The flashsale admin console: plain JS, no build step. Every figure comes
// from /admin/v1 with the admin token, kept in this tab's sessionStorage and
// never put in a URL. Data from the API reaches the page only through
// textContent and attributes, never as markup. This file: the API client,
// routing, sign-in, the activity list and form; live.js: the live page.
'use strict';

const TOKEN_KEY = 'flashsale.adminToken';
const PAGE_SIZE = 20;
const FIELDS = ['type', 'name', 'sku', 'price_cents', 'total_stock', 'per_user_limit', 'starts_at', 'ends_at',
  'payment_ttl_seconds', 'group_size', 'group_ttl_seconds', 'shards'];
const INT_FIELDS = new Set(['price_cents', 'total_stock', 'per_user_limit', 'payment_ttl_seconds', 'group_size', 'group_ttl_seconds', 'shards']);
// An item's fields, named items[i].<field> in the form as in the API's errors.
const ITEM_FIELDS = ['sku', 'label', 'price_cents', 'stock', 'per_user_limit'];
const ONE_ITEM = ['sku', 'price_cents', 'total_stock']; // a sale of items leaves these out

const $ = (sel, root = document) => root.querySelector(sel);
const view = () => $('#view');

// ---------- the API ----------

// ApiError is an error answer: the API's stable code, its message and, for a
// validation error, the request field at fault.
class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || '';
  }
}

// SignedOut ends whatever was in progress: the token was refused and the
// sign-in page is showing.
class SignedOut extends Error {}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

// call sends one request to /admin/v1 with tok and returns the JSON answer,
// or throws an ApiError.
async function call(tok, method, path, body) {
  const init = { method, headers: { Authorization: 'Bearer ' + tok }, cache: 'no-store' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch('v1' + path, init); // relative to /admin/
  } catch (e) {
    throw new ApiError(0, 'NETWORK', 'the API did not answer (' + e.message + ')');
  }
  let data = null;
  try { data = await resp.json(); } catch (e) { /* not JSON: described below */ }
  if (!resp.ok) {
    const e = (data && data.error) || {};
    throw new ApiError(resp.status, e.code || 'HTTP_' + resp.status, e.message || resp.statusText || 'error', e.field);
  }
  return data;
}

// api is call with the signed-in token; a 401 signs out with a message.
async function api(method, path, body) {
  try {
    return await call(token(), method, path, body);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      signOut('Your admin token was refused (wrong, expired or changed on the server). Sign in again.');
      throw new SignedOut();
    }
    throw e;
  }
}

// ---------- routing ----------

let leave = () => {}; // stops the current view's timers
let flash = '';       // why the sign-in page shows, until signed in again

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  flash = message || '';
  if (location.hash !== '#/signin') location.hash = '#/signin'; // hashchange routes there
  else if ($('#signin')) $('#signin-error').textContent = flash; // keep what is typed
  else route();
}

const routes = [
  [/^#\/signin$/, showSignIn],
  [/^#\/activities(?:\?(.*))?$/, (m) => showList(new URLSearchParams(m[1] || ''))],
  [/^#\/new$/, () => showForm(null)],
  [/^#\/activities\/(\d+)\/edit$/, (m) => showForm(m[1])],
  [/^#\/activities\/(\d+)$/, (m) => showLive(m[1])],
];

function route() {
  leave();
  leave = () => {};
  const hash = location.hash || '#/activities';
  if (!token() && hash !== '#/signin') {
    location.hash = '#/signin';
    return;
  }
  $('#nav').hidden = !token();
  for (const [re, show] of routes) {
    const m = hash.match(re);
    if (m) {
      show(m);
      return;
    }
  }
  location.hash = '#/activities';
}

// mount replaces the view with a copy of template id and returns the copy's
// element: a view still loading when the user moves on fills a detached
// element, not the next view.
function mount(id) {
  const el = document.getElementById(id).content.firstElementChild.cloneNode(true);
  view().replaceChildren(el);
  return el;
}

// failed shows an error in el, unless it was a sign-out (already handled).
function failed(el, e) {
  if (e instanceof SignedOut) return;
  el.textContent = e.message ? e.message + (e.code ? ' (' + e.code + ')' : '') : String(e);
}

// confirmAction asks in a modal dialog; resolves true when confirmed.
function confirmAction(text, okLabel) {
  const dlg = $('#confirm');
  $('#confirm-text').textContent = text;
  $('#confirm-ok').textContent = okLabel;
  dlg.returnValue = '';
  dlg.showModal();
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'ok'), { once: true });
  });
}

// transition publishes or closes activity a after a confirmation; resolves
// true when done.
async function transition(a, action, errEl) {
  const what = action === 'publish'
    ? 'Publish "' + a.name + '"? Its stock goes on sale in Redis; after this only its name and a later end can change.'
    : 'Close "' + a.name + '"? Sales stop at once; a closed activity never reopens.';
  if (!(await confirmAction(what, action === 'publish' ? 'Publish' : 'Close sale'))) return false;
  try {
    await api('POST', '/activities/' + a.id + '/' + action);
    return true;
  } catch (e) {
    failed(errEl, e);
    return false;
  }
}

// ---------- sign in ----------

function showSignIn() {
  const root = mount('tpl-signin');
  $('#nav').hidden = true;
  const err = $('#signin-error', root);
  // Kept, not consumed: two refused requests at once (a live page polls
  // two) may render this page twice.
  err.textContent = flash;
  $('#token', root).focus();
  $('#signin-form', root).addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const tok = $('#token', root).value.trim();
    if (!tok) {
      err.textContent = 'Enter the admin token.';
      return;
    }
    err.textContent = '';
    try {
      await call(tok, 'GET', '/activities?page_size=1'); // proves the token
    } catch (e) {
      err.textContent = e.status === 401
        ? 'The API refused this token: ' + e.message + '. Check ADMIN_TOKEN.'
        : 'Could not sign in: ' + e.message;
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, tok);
    flash = '';
    location.hash = '#/activities';
  });
}

// ---------- activities ----------

const fmtTime = (iso) => (iso ? new Date(iso).toLocaleString() : '—');
const fmtNum = (n) => (n === null || n === undefined ? '—' : Number(n).toLocaleString());

async function showList(params) {
  const root = mount('tpl-list');
  const status = params.get('status') || '';
  const page = Math.max(1, parseInt(params.get('page') || '1', 10) || 1);
  const go = (st, pg) => {
    const q = new URLSearchParams();
    if (st) q.set('status', st);
    if (pg > 1) q.set('page', String(pg));
    location.hash = '#/activities' + (q.toString() ? '?' + q : '');
  };
  const filter = $('#status-filter', root);
  filter.value = status;
  filter.addEventListener('change', () => go(filter.value, 1));
  const err = $('#list-error', root);
  let data;
  try {
    const q = new URLSearchParams({ page: String(page), page_size: String(PAGE_SIZE) });
    if (status) q.set('status', status);
    data = await api('GET', '/activities?' + q);
  } catch (e) {
    failed(err, e);
    return;
  }
  const pages = Math.max(1, Math.ceil(data.total / data.page_size));
  $('#list-total', root).textContent = data.total + (data.total === 1 ? ' activity' : ' activities');
  $('#page-info', root).textContent = 'page ' + data.page + ' of ' + pages;
  $('#prev', root).disabled = page <= 1;
  $('#next', root).disabled = page >= pages;
  $('#prev', root).addEventListener('click', () => go(status, page - 1));
  $('#next', root).addEventListener('click', () => go(status, page + 1));
  $('#list-empty', root).hidden = data.items.length > 0;
  const tbody = $('#activities tbody', root);
  for (const a of data.items) {
    const row = document.getElementById('tpl-row').content.firstElementChild.cloneNode(true);
    row.dataset.id = a.id;
    $('.c-id', row).textContent = a.id;
    const name = $('.c-name', row);
    name.textContent = a.name;
    name.href = '#/activities/' + a.id;
    $('.c-type', row).textContent = a.type;
    const badge = $('.c-status', row);
    badge.textContent = a.status;
    badge.dataset.status = a.status;
    // What is left of the total: a sold-out sale reads "0 of 1,000"; a
    // draft, not on sale, "— of 1,000".
    $('.c-stock', row).textContent = fmtNum(a.stock_remaining) + ' of ' + fmtNum(a.total_stock);
    $('.c-window', row).textContent = fmtTime(a.starts_at) + ' → ' + fmtTime(a.ends_at);
    $('.c-live', row).href = '#/activities/' + a.id;
    const edit = $('.c-edit', row);
    edit.href = '#/activities/' + a.id + '/edit';
    edit.hidden = a.status === 'closed';
    for (const action of ['publish', 'close']) {
      const btn = $('.c-' + action, row);
      btn.hidden = a.status !== (action === 'publish' ? 'draft' : 'published');
      btn.addEventListener('click', async () => {
        if (await transition(a, action, err)) route();
      });
    }
    tbody.append(row);
  }
}

// localInput formats an RFC 3339 time for a datetime-local input, in the
// browser's time zone, to the second.
function localInput(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  const p = (n) => String(n).padStart(2, '0');
  return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' +
    p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
}

// fieldValue is what the API gets for an input: an integer field's number
// (0 when empty: the API says what is wrong), a time in RFC 3339 (omitted
// when empty), text as is.
function fieldValue(name, raw) {
  if (INT_FIELDS.has(name)) return raw.trim() === '' ? 0 : Number(raw);
  if (name === 'starts_at' || name === 'ends_at') {
    if (raw === '') return undefined;
    const d = new Date(raw); // no offset: the browser's local time
    return isNaN(d) ? raw : d.toISOString();
  }
  return raw;
}

// addItemRow adds a row of inputs for an item (it: its values, if any) to
// the form root.
function addItemRow(root, it) {
  const row = document.getElementById('tpl-item').content.firstElementChild.cloneNode(true);
  for (const f of ITEM_FIELDS) {
    const v = it ? it[f] : undefined;
    $('.i-' + f, row).value = v === undefined || v === null || (f === 'per_user_limit' && v === 0) ? '' : String(v);
  }
  $('.i-remove', row).addEventListener('click', () => { row.remove(); renumberItems(root); });
  $('#item-rows', root).append(row);
  renumberItems(root);
  return row;
}

// renumberItems names each row's inputs and errors by its place,
// items[i].<field> (the API's errors name them so), and shows the one
// item's fields only while there are no rows.
function renumberItems(root) {
  const rows = root.querySelectorAll('.item-row');
  rows.forEach((row, i) => {
    for (const f of ITEM_FIELDS) {
      const name = 'items[' + i + '].' + f;
      const el = $('.i-' + f, row);
      el.name = name;
      el.id = 'f-' + name;
      el.previousElementSibling.htmlFor = el.id;
      $('.e-' + f, row).id = 'err-' + name;
    }
  });
  root.querySelectorAll('.one-item').forEach((el) => { el.hidden = rows.length > 0; });
}

// itemsOf is the form's items as the API takes them.
function itemsOf(root) {
  return [...root.querySelectorAll('.item-row')].map((row) => {
    const it = {};
    for (const f of ITEM_FIELDS) {
      const raw = $('.i-' + f, row).value;
      if (f === 'sku' || f === 'label') it[f] = raw;
      else if (f === 'per_user_limit') { if (raw.trim() !== '') it[f] = Number(raw); } else it[f] = raw.trim() === '' ? 0 : Number(raw);
    }
    return it;
  });
}

async function showForm(id) {
  const root = mount('tpl-form');
  const form = $('#activity-form', root);
  const input = (f) => form.elements[f];
  const formErr = $('#form-error', root);
  $('#add-item', root).addEventListener('click', () => $('.i-sku', addItemRow(root)).focus());
  const groupOnly = () => {
    const g = input('type').value === 'groupbuy';
    root.querySelectorAll('.group-only').forEach((el) => { el.hidden = !g; });
    root.querySelectorAll('.seckill-only').forEach((el) => { el.hidden = g; });
  };
  input('type').addEventListener('change', groupOnly);

  let original = null; // the activity as loaded (edit), its inputs' values
  if (id === null) {
    const start = new Date(Math.ceil(Date.now() / 60000) * 60000);
    input('starts_at').value = localInput(start.toISOString());
    input('ends_at').value = localInput(new Date(start.getTime() + 3600e3).toISOString());
    input('per_user_limit').value = '1';
    input('payment_ttl_seconds').value = '900';
    input('group_size').value = '3';
    input('group_ttl_seconds').value = '3600';
    input('shards').value = '1';
  } else {
    $('#form-title', root).textContent = 'Edit activity ' + id;
    $('#form-submit', root).textContent = 'Save changes';
    $('#form-cancel', root).href = '#/activities/' + id;
    let a;
    try {
      a = await api('GET', '/activities/' + id);
    } catch (e) {
      failed(formErr, e);
      return;
    }
    original = {};
    for (const f of FIELDS) {
      const v = a[f];
      input(f).value = v === undefined || v === null ? '' : (f.endsWith('_at') ? localInput(v) : String(v));
      original[f] = input(f).value;
    }
    if (a.items && a.items.length > 1) { // several items: their rows; one is the fields above
      for (const it of a.items) addItemRow(root, it);
    }
    original.items = JSON.stringify(itemsOf(root));
    input('type').disabled = true; // the type never changes
    const note = $('#form-note', root);
    if (a.status !== 'draft') {
      const editable = a.status === 'published' ? ['name', 'ends_at'] : [];
      for (const f of FIELDS) input(f).disabled = !editable.includes(f);
      root.querySelectorAll('.item-row input').forEach((el) => { el.disabled = true; });
      root.querySelectorAll('.i-remove, #add-item').forEach((el) => { el.hidden = true; });
      note.hidden = false;
      note.textContent = a.status === 'published'
        ? 'Published: only the name and a later end can change.'
        : 'Closed: nothing can change.';
      $('#form-submit', root).hidden = a.status === 'closed';
    }
  }
  groupOnly();

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    formErr.textContent = '';
    root.querySelectorAll('.field-error').forEach((el) => { el.textContent = ''; });
    root.querySelectorAll('[aria-invalid]').forEach((el) => el.removeAttribute('aria-invalid'));
    const groupBuy = input('type').value === 'groupbuy';
    const several = root.querySelectorAll('.item-row').length > 0;
    const body = {};
    for (const f of FIELDS) {
      if (!groupBuy && f.startsWith('group_')) continue;
      if (groupBuy && f === 'shards') continue; // a group buy is one shard
      if (several && ONE_ITEM.includes(f)) continue; // the items' then
      if (original && (input(f).disabled || input(f).value === original[f])) continue; // a patch sends changes only
      const v = fieldValue(f, input(f).value);
      if (v !== undefined) body[f] = v;
    }
    if (several && (!original || JSON.stringify(itemsOf(root)) !== original.items)) body.items = itemsOf(root);
    if (original && Object.keys(body).length === 0) {
      formErr.textContent = 'Nothing changed.';
      return;
    }
    const submit = $('#form-submit', root);
    submit.disabled = true;
    try {
      const a = await api(original ? 'PATCH' : 'POST', original ? '/activities/' + id : '/activities', body);
      location.hash = '#/activities/' + a.id;
    } catch (e) {
      const errEl = e.field && root.querySelector('#err-' + CSS.escape(e.field));
      const at = e.field && input(e.field); // none for "items" as a whole
      if (errEl && !(at && at.closest('[hidden]'))) {
        // The API's message names the field; beside it, the rest says enough.
        const prefix = e.field + ': ';
        errEl.textContent = e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
        if (at) {
          at.setAttribute('aria-invalid', 'true');
          at.focus();
        }
      } else {
        failed(formErr, e);
      }
    } finally {
      submit.disabled = false;
    }
  });
}

// ---------- start ----------

window.addEventListener('hashchange', route);
document.addEventListener('DOMContentLoaded', () => {
  $('#signout').addEventListener('click', () => signOut('Signed out.'));
  route();
});
