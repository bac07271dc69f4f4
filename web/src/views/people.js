// Profiles and groups: the profile editor with the privacy settings, and
// the details panel of a conversation (a group's title, description,
// picture, history setting and members with their roles and what the
// caller's role lets them do; a direct chat's peer with Block). Every
// action calls the HTTP API and shows the server's refusal in place, and
// a wait before a retry (chatd busy) too; closing a panel stops its
// requests.

import { h, icon, replace, setText } from './dom.js';
import { avatar, displayName, keptAvatar, personAvatar, userName } from './format.js';
import { parseUserId } from './dialogs.js';
import { leaveConfirmation } from './leave.js';
import { aboutOpenConversation } from './lifecycle.js';
import { waitText } from '../api.js';

/**
 * A modal panel: title, close button, body; Esc and the backdrop close it,
 * and, bound (about the open conversation), another conversation opened.
 * req: the options (api.js Req) of the panel's requests.
 */
function panel(title, testid, bound = false) {
  const body = h('div', { class: 'panel-body' });
  const error = h('p', { class: 'form-error', role: 'alert', 'data-testid': 'panel-error' });
  const closeBtn = h('button', { class: 'icon-btn', type: 'button', title: 'Close', 'aria-label': 'Close', 'data-testid': 'panel-close' }, icon('close'));
  const box = h(
    'div',
    { class: 'modal panel', role: 'dialog', 'aria-modal': 'true', 'aria-label': title, 'data-testid': testid },
    h('div', { class: 'panel-head' }, h('h2', null, title), closeBtn),
    error,
    body,
  );
  const backdrop = h('div', { class: 'modal-backdrop' }, box);
  const prevFocus = document.activeElement;
  const ctl = new AbortController();
  const req = { signal: ctl.signal, onWait: (s, err) => (error.textContent = s ? waitText(s, err) : '') };
  const onKey = (e) => e.key === 'Escape' && close();
  const forget = bound ? aboutOpenConversation(() => close()) : () => {};
  const closers = [];
  function close() {
    forget();
    for (const fn of closers.splice(0)) fn();
    ctl.abort();
    backdrop.remove();
    document.removeEventListener('keydown', onKey);
    if (prevFocus && prevFocus.focus) prevFocus.focus();
  }
  closeBtn.addEventListener('click', close);
  backdrop.addEventListener('mousedown', (e) => e.target === backdrop && close());
  document.addEventListener('keydown', onKey);
  document.body.appendChild(backdrop);
  /** Runs fn, showing its error in the panel; resolves to whether it worked. */
  async function attempt(fn) {
    error.textContent = '';
    try {
      await fn();
      return true;
    } catch (e) {
      error.textContent = e.message || String(e);
      return false;
    }
  }
  /** fn runs when the panel closes. */
  const onClose = (fn) => closers.push(fn);
  return { body, close, attempt, box, req, onClose };
}

/**
 * A button that asks once more before it acts: the first click arms it
 * ("Confirm: …"), a second within 4 seconds runs fn. No window.confirm:
 * it blocks the page and cannot be styled.
 */
function armed(label, confirmLabel, attrs, fn) {
  const b = h('button', { class: 'btn', type: 'button', ...attrs }, label);
  let timer = 0;
  b.addEventListener('click', () => {
    if (!b.dataset.armed) {
      b.dataset.armed = 'true';
      b.textContent = confirmLabel;
      timer = setTimeout(() => {
        delete b.dataset.armed;
        b.textContent = label;
      }, 4000);
      return;
    }
    clearTimeout(timer);
    delete b.dataset.armed;
    b.textContent = label;
    fn();
  });
  return b;
}

function field(label, input, hint) {
  return h('label', { class: 'field' }, h('span', null, label), input, hint && h('span', { class: 'hint' }, hint));
}

function toggle(label, testid, checked, onchange, hint) {
  const box = h('input', { type: 'checkbox', 'data-testid': testid });
  box.checked = checked;
  box.addEventListener('change', () => onchange(box.checked, box));
  return h('label', { class: 'toggle' }, box, h('span', null, h('strong', null, label), hint && h('span', { class: 'hint' }, hint)));
}

/** What an avatar may be (docs/http.md "Avatars"). */
const AVATAR_TYPES = 'image/jpeg,image/png,image/gif,image/webp';

/**
 * A profile's or a group's picture: an https address, or a picture file
 * uploaded to chatd as an avatar (current is then its path). changes()
 * uploads a chosen file and resolves with what to send: avatarUploadId,
 * avatarUrl ("" removes it), or nothing when it stays. A file is uploaded
 * once: a save tried again (the profile or group was refused, or its
 * answer lost) sends the same upload, not another one charged again
 * against the day's bytes; one whose upload failed is uploaded again
 * (Uploader.send: to the same ticket), and one chosen anew is a new one.
 */
export function pictureField(current, testid, disabled, uploader) {
  const initial = keptAvatar(current) ? '' : current || '';
  const url = h('input', { value: initial, placeholder: 'https://…', 'data-testid': testid, inputmode: 'url', disabled });
  const file = h('input', { type: 'file', accept: AVATAR_TYPES, 'data-testid': `${testid}-file`, disabled });
  let removed = false;
  let upload = null; // {file, handle, done}: the chosen file's upload
  const remove = h('button', {
    class: 'btn small', type: 'button', 'data-testid': `${testid}-remove`, hidden: !current || disabled,
    onclick: () => {
      removed = true;
      url.value = '';
      file.value = '';
      remove.hidden = true;
    },
  }, 'Remove picture');
  return {
    el: h('div', { class: 'stack' }, url, h('div', { class: 'row' }, file, remove)),
    /** @param {import('../api.js').Req} req */
    async changes(req = {}) {
      const f = file.files && file.files[0];
      if (f) {
        if (upload?.file !== f) upload = { file: f, handle: {}, done: null };
        const u = upload;
        if (!u.done) {
          // The previous try's ticket, if any, and this try's wait and cancel.
          u.handle = { ticket: u.handle.ticket, ticketKey: u.handle.ticketKey, onWait: req.onWait, signal: req.signal };
          u.done = uploader.uploadAvatar(f, () => {}, u.handle);
          u.done.catch(() => (u.done = null));
        }
        return { avatarUploadId: (await u.done).id };
      }
      const v = url.value.trim();
      if (v !== initial || (removed && current)) return { avatarUrl: v };
      return {};
    },
  };
}

/**
 * The caller's profile (name, about, picture) and privacy settings.
 * @param {{people:import('../store/people.js').People, api:import('../api.js').Api, notify:(m:string)=>void,
 *   signOutEverywhere:()=>void}} ctx
 */
export async function openProfile(ctx) {
  const { people, api } = ctx;
  const p = panel('Profile and settings', 'profile-panel');
  let me;
  if (!(await p.attempt(async () => (me = await people.loadMe(p.req))))) return;
  const name = h('input', { value: me.displayName, maxlength: '64', placeholder: `User ${me.id}`, 'data-testid': 'profile-name', autocomplete: 'name' });
  const about = h('textarea', { rows: '2', maxlength: '500', 'data-testid': 'profile-about' });
  about.value = me.about || '';
  let picture = pictureField(me.avatar, 'profile-avatar', false, ctx.media.uploader);
  const pictureSlot = h('div', null, picture.el);
  const preview = h('span', { class: 'avatar-slot' }, personAvatar(me.id, 'large'));
  const heading = h('strong', { 'data-testid': 'profile-heading' }, displayName(me.id));
  const save = h('button', { class: 'btn primary', type: 'submit', 'data-testid': 'profile-save' }, 'Save profile');
  const form = h(
    'form',
    { class: 'stack' },
    h('div', { class: 'profile-card' }, preview, h('div', null, heading, h('p', { class: 'hint' }, `User id ${me.id}`))),
    field('Display name', name, '1 to 64 characters; others see it instead of your id.'),
    field('About', about),
    field('Picture', pictureSlot, 'A picture file (JPEG, PNG, GIF or WebP), or an https:// image address.'),
    h('div', { class: 'modal-actions' }, save),
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    save.disabled = true;
    const ok = await p.attempt(async () => {
      const saved = await people.saveProfile({ displayName: name.value, about: about.value, ...(await picture.changes(p.req)) }, p.req);
      picture = pictureField(saved.avatar, 'profile-avatar', false, ctx.media.uploader);
      pictureSlot.replaceChildren(picture.el);
      preview.replaceChildren(personAvatar(me.id, 'large'));
      heading.textContent = displayName(me.id);
    });
    save.disabled = false;
    if (ok) ctx.notify('Profile saved.');
  });
  const settings = h(
    'div',
    { class: 'stack settings' },
    h('h3', null, 'Privacy'),
    toggle('Read receipts', 'setting-read-receipts', people.settings.readReceipts, (v, box) =>
      p.attempt(() => people.saveSettings({ readReceipts: v }, p.req)).then((ok) => ok || (box.checked = !v)),
      'Off: nobody sees when you read their messages, and you do not see when others read yours.'),
    toggle('Online status', 'setting-presence', people.settings.presence, (v, box) =>
      p.attempt(() => people.saveSettings({ presence: v }, p.req)).then((ok) => ok || (box.checked = !v)),
      'Off: nobody sees when you are online or were last seen, and you do not see theirs.'),
  );
  const blocked = h('ul', { class: 'plain-list', 'data-testid': 'blocked-list' });
  const blocks = h('div', { class: 'stack' }, h('h3', null, 'Blocked'), blocked);
  async function loadBlocks() {
    const r = await api.blocks(p.req);
    replace(
      blocked,
      r.blocked.length
        ? r.blocked.map((b) =>
            h('li', { class: 'person', 'data-testid': 'blocked-user', 'data-user-id': b.userId }, personAvatar(b.userId), h('span', { class: 'grow' }, displayName(b.userId)),
              h('button', { class: 'btn', type: 'button', 'data-testid': 'unblock', onclick: () => p.attempt(async () => { await api.unblock(b.userId, p.req); await loadBlocks(); }) }, 'Unblock')),
          )
        : h('li', { class: 'hint' }, 'Nobody.'),
    );
  }
  // A lost or stolen phone: every token of the user stops working, its
  // connections end and its push registrations go (docs/http.md).
  const everywhere = armed('Sign out on every device', 'Confirm: sign out everywhere', { 'data-testid': 'signout-everywhere' }, async () => {
    everywhere.disabled = true;
    if (await p.attempt(() => api.revokeTokens(p.req))) {
      p.close();
      ctx.signOutEverywhere();
    } else everywhere.disabled = false;
  });
  const devices = h('div', { class: 'stack' }, h('h3', null, 'Devices'),
    h('p', { class: 'hint' }, 'Lost a phone? This signs you out here and on every other device and browser, and stops their notifications.'),
    h('div', null, everywhere));
  replace(p.body, form, settings, blocks, devices);
  p.attempt(loadBlocks);
  name.focus();
}

/**
 * Mute: no pushes from this conversation (PUT /v1/conversations/{id}/settings;
 * mentions in a group still push, the server's default). A mute that has
 * run out (mutedUntil passed) shows as off.
 */
function muteToggle(ctx, c, p) {
  const s = c.settings;
  const on = Boolean(s && s.muted && (!s.mutedUntil || Date.parse(s.mutedUntil) > Date.now()));
  return toggle('Mute notifications', 'mute-toggle', on, (v, box) =>
    p.attempt(async () => {
      // The PUT sets every setting: mentions is sent as it stands, or a
      // group's "mentions still notify: off" would be turned back on.
      c.settings = await ctx.api.setConversationSettings(c.id, { muted: v, mentions: !(s && s.mentions === false) }, p.req);
      ctx.state.changed('inbox');
      ctx.notify(v ? 'Muted: this chat sends no notifications.' : 'Notifications are on for this chat.');
    }).then((ok) => {
      if (!ok) box.checked = !v;
    }),
    c.type === 'GROUP' ? 'Messages that mention you still notify.' : undefined,
  );
}

const ROLE_LABEL = { owner: 'Owner', admin: 'Admin', member: '' };

/**
 * The details of a conversation: a group's settings and members, or a
 * direct chat's other person.
 * @param {{state:any, sync:any, api:import('../api.js').Api, people:any, notify:(m:string)=>void, go:(cid:number|null)=>void}} ctx
 */
export async function openInfo(ctx, cid) {
  const c = ctx.state.conv(cid);
  if (!c) return;
  if (c.type === 'DIRECT') return openPerson(ctx, c);
  const { api, state, sync } = ctx;
  const p = panel('Group info', 'group-info', true);
  let members = [];
  const me = state.me;
  const myRole = () => members.find((m) => m.userId === me)?.role || 'member';
  const canManage = () => myRole() === 'owner' || myRole() === 'admin';
  // What render fills. The settings form stays while the rights it was
  // built for do, and the add field always: a change of the member list
  // while the panel is open does not wipe what is being typed.
  const count = h('p', { class: 'hint' });
  const formSlot = h('div', null);
  const membersHeading = h('h3', null);
  const memberList = h('ul', { class: 'plain-list', 'data-testid': 'member-list' });
  const leaveSlot = h('div', { class: 'modal-actions' });
  let formRights = null;

  // Answers of the member list asked for: a later one's answer is never
  // replaced by an earlier one's.
  let asked = 0;
  async function loadMembers() {
    const n = ++asked;
    const list = await api.members(cid, p.req);
    if (n !== asked) return false;
    members = list;
    return true;
  }

  async function reload() {
    const fresh = await loadMembers();
    await sync.refreshMembers(cid);
    if (fresh) render();
  }

  // Roles and members change while the panel is open (the user demoted
  // or promoted, someone added or removed, here or elsewhere): its
  // buttons follow, or it would offer what chatd refuses. Its group's
  // membership events (and their stream entries, which a session that
  // dropped the events still gets) and a reconnect (events missed) read
  // the list again; sync keeps the conversation's own up to date.
  const onEvent = (e) => {
    const ev = e.detail;
    if (ev.conversationId !== cid || !/^member\.|^system\.new$/.test(ev.type)) return;
    if (ev.type === 'system.new' && ev.action === 'group.updated') return;
    if (ev.type === 'member.removed' && ev.userId === me) return p.close();
    follow();
  };
  // Failing (offline), the list stays as it was: the next event or the
  // reconnect reads it again, and an action's refusal shown stays.
  const follow = () => loadMembers().then((fresh) => fresh && render(false), () => {});
  sync.session?.addEventListener('event', onEvent);
  sync.session?.addEventListener('connected', follow);
  p.onClose(() => {
    sync.session?.removeEventListener('event', onEvent);
    sync.session?.removeEventListener('connected', follow);
  });

  function settingsForm() {
    // What the form shows: a save sends what the user changed from it, not
    // what differs from the group now (changed elsewhere meanwhile, by
    // conversation.updated), which would undo the change made elsewhere.
    const shown = { title: c.title, about: c.about || '', history: c.historyVisible || 'joined' };
    const title = h('input', { value: shown.title, maxlength: '200', 'data-testid': 'group-title', disabled: !canManage() });
    const about = h('textarea', { rows: '2', maxlength: '500', 'data-testid': 'group-about', disabled: !canManage() });
    about.value = shown.about;
    const pic = pictureField(c.avatarUrl, 'group-avatar', !canManage(), ctx.media.uploader);
    const history = h('select', { 'data-testid': 'group-history', disabled: myRole() !== 'owner' },
      h('option', { value: 'joined' }, 'From when they join'), h('option', { value: 'all' }, 'The whole history'));
    history.value = shown.history;
    const save = h('button', { class: 'btn primary', type: 'submit', 'data-testid': 'group-save', hidden: !canManage() }, 'Save');
    const form = h(
      'form',
      { class: 'stack' },
      h('div', { class: 'profile-card' }, avatar(c, 'large'), h('div', null, h('strong', null, c.title || `Group ${c.id}`), count)),
      field('Name', title),
      field('Description', about),
      field('Picture', pic.el, 'A picture file (JPEG, PNG, GIF or WebP), or an https:// image address.'),
      field('New members read', history, 'Only the owner changes this.'),
      h('div', { class: 'modal-actions' }, save),
    );
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const changes = {};
      if (title.value.trim() !== shown.title) changes.title = title.value;
      if (about.value.trim() !== shown.about) changes.about = about.value;
      if (myRole() === 'owner' && history.value !== shown.history) changes.historyVisible = history.value;
      save.disabled = true;
      let changed = false;
      const ok = await p.attempt(async () => {
        Object.assign(changes, await pic.changes(p.req));
        if (!Object.keys(changes).length) return;
        changed = true;
        state.setConversation(await api.updateGroup(cid, changes, p.req));
      });
      save.disabled = false;
      if (ok && changed) {
        ctx.notify('Group updated.');
        render();
      }
    });
    return form;
  }

  function memberRow(m) {
    const actions = [];
    const role = myRole();
    if (m.userId !== me) {
      if (role === 'owner') {
        actions.push(m.role === 'admin'
          ? h('button', { class: 'btn small', type: 'button', 'data-testid': 'make-member', onclick: () => act(() => api.setRole(cid, m.userId, 'member', p.req)) }, 'Dismiss admin')
          : h('button', { class: 'btn small', type: 'button', 'data-testid': 'make-admin', onclick: () => act(() => api.setRole(cid, m.userId, 'admin', p.req)) }, 'Make admin'));
        actions.push(armed('Make owner', 'Confirm: you become an admin', { class: 'btn small', 'data-testid': 'make-owner' },
          () => act(() => api.transferOwner(cid, m.userId, p.req))));
      }
      if (m.role !== 'owner' && (role === 'owner' || (role === 'admin' && m.role === 'member'))) {
        actions.push(h('button', { class: 'btn small danger', type: 'button', 'data-testid': 'remove-member', onclick: () => act(() => api.removeMember(cid, m.userId, p.req)) }, 'Remove'));
      }
    }
    return h(
      'li',
      { class: 'person', 'data-testid': 'member', 'data-user-id': m.userId, 'data-role': m.role },
      personAvatar(m.userId),
      h('span', { class: 'grow' }, h('strong', null, userName(m.userId, me)), ROLE_LABEL[m.role] && h('span', { class: 'role' }, ROLE_LABEL[m.role])),
      actions.length ? h('span', { class: 'actions' }, actions) : null,
    );
  }

  async function act(fn) {
    if (await p.attempt(fn)) await p.attempt(reload);
  }

  const addInput = h('input', { type: 'number', min: '1', step: '1', inputmode: 'numeric', placeholder: 'User id to add', 'data-testid': 'add-member-id' });
  const add = h('form', { class: 'row' }, addInput,
    h('button', { class: 'btn', type: 'submit', 'data-testid': 'add-member-submit' }, icon('plus'), 'Add'));
  add.addEventListener('submit', (e) => {
    e.preventDefault();
    act(async () => {
      await api.addMember(cid, parseUserId(addInput.value.trim()), p.req);
      addInput.value = '';
    });
  });

  /** Shows the panel; form: the settings form is built again even if the rights it was built for stand. */
  function render(form = true) {
    const rights = canManage() ? myRole() : 'member';
    if (form || rights !== formRights) {
      formRights = rights;
      formSlot.replaceChildren(settingsForm());
    }
    count.textContent = `${members.length} members`;
    add.hidden = !canManage();
    const leave = armed('Leave group', leaveConfirmation(members, me),
      { class: 'btn danger', 'data-testid': 'leave-group' }, async () => {
        if (await p.attempt(() => api.removeMember(cid, me, p.req))) {
          p.close();
          sync.removed(cid);
          ctx.go(null);
        }
      });
    setText(membersHeading, `Members (${members.length})`);
    memberList.replaceChildren(...members.map(memberRow));
    leaveSlot.replaceChildren(leave);
    if (!p.body.firstChild) {
      replace(p.body, formSlot, h('div', { class: 'stack' }, membersHeading, add, memberList), muteToggle(ctx, c, p), leaveSlot);
    }
  }

  await p.attempt(reload);
}

/** A direct chat's other person: profile, last seen, Block. */
async function openPerson(ctx, c) {
  const { api, people } = ctx;
  const peer = c.peerId();
  const p = panel('Contact info', 'person-info', true);
  let prof = null;
  let blocked = false;
  async function load() {
    prof = await api.user(peer, p.req);
    people.profiles.set(peer, { id: prof.id, displayName: prof.displayName, avatar: prof.avatar, about: prof.about });
    blocked = (await api.blocks(p.req)).blocked.some((b) => b.userId === peer);
    render();
  }
  function render() {
    let seen = 'Last seen: hidden';
    if (prof.online) seen = 'Online';
    else if (prof.lastSeen) seen = `Last seen ${new Date(prof.lastSeen).toLocaleString()}`;
    else if (prof.online === false) seen = 'Not seen yet';
    const blockBtn = h('button', { class: `btn ${blocked ? '' : 'danger'}`, type: 'button', 'data-testid': 'block-toggle' }, blocked ? 'Unblock' : 'Block');
    blockBtn.addEventListener('click', () =>
      p.attempt(async () => {
        if (blocked) await api.unblock(peer, p.req);
        else await api.block(peer, p.req);
        blocked = !blocked;
        ctx.notify(blocked ? `${displayName(peer)} is blocked: they cannot message you here.` : `${displayName(peer)} is unblocked.`);
        render();
      }),
    );
    replace(
      p.body,
      h('div', { class: 'profile-card' }, personAvatar(peer, 'large'),
        h('div', null, h('strong', { 'data-testid': 'person-name' }, displayName(peer)), h('p', { class: 'hint', 'data-testid': 'person-seen' }, seen))),
      prof.about ? h('p', { class: 'about', 'data-testid': 'person-about' }, prof.about) : null,
      h('p', { class: 'hint' }, `User id ${peer}`),
      muteToggle(ctx, c, p),
      h('div', { class: 'modal-actions' }, blockBtn),
    );
  }
  await p.attempt(load);
}
