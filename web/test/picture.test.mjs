// Unit tests of the picture field of the profile and group panels
// (src/views/people.js), on the stand-in DOM. Run: node --test web/test/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeDocument } from './fakedom.mjs';

test('a save tried again after the profile or group was refused sends the chosen picture once, not an upload per try', async () => {
  const undo = fakeDocument();
  try {
    const { pictureField } = await import('../src/views/people.js');
    const uploads = [];
    const uploader = {
      async uploadAvatar(file) {
        uploads.push(file.name);
        return { id: `up${uploads.length}` };
      },
    };
    const pic = pictureField(null, 'profile-avatar', false, uploader);
    const file = { name: 'me.png', type: 'image/png', size: 2048 };
    pic.el.find('profile-avatar-file').files = [file];
    // The first save: the picture goes up, then PUT /v1/me is refused (a
    // display name too long, say); the user fixes it and saves again.
    assert.deepEqual(await pic.changes(), { avatarUploadId: 'up1' });
    assert.deepEqual(await pic.changes(), { avatarUploadId: 'up1' }, 'the second save sent another upload');
    assert.deepEqual(uploads, ['me.png'], 'the same picture was uploaded again, charged again against the day\'s bytes');

    // Another file chosen is uploaded.
    pic.el.find('profile-avatar-file').files = [{ name: 'other.png', type: 'image/png', size: 1024 }];
    assert.deepEqual(await pic.changes(), { avatarUploadId: 'up2' });
  } finally {
    undo();
  }
});

test('a picture whose upload failed is uploaded again at the next save', async () => {
  const undo = fakeDocument();
  try {
    const { pictureField } = await import('../src/views/people.js');
    let fail = true;
    let tries = 0;
    const uploader = {
      async uploadAvatar() {
        tries++;
        if (fail) throw Object.assign(new Error('the upload was cut off'), { status: 0, code: 'network' });
        return { id: 'up1' };
      },
    };
    const pic = pictureField(null, 'group-avatar', false, uploader);
    pic.el.find('group-avatar-file').files = [{ name: 'g.png', type: 'image/png', size: 10 }];
    await assert.rejects(pic.changes(), (e) => e.code === 'network');
    fail = false;
    assert.deepEqual(await pic.changes(), { avatarUploadId: 'up1' });
    assert.equal(tries, 2);
  } finally {
    undo();
  }
});
