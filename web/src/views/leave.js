// What leaving a group does, as the server decides it (store/groups.go):
// the owner's leave hands the group to the longest-standing admin, else to
// the longest-standing member, and the last member's leave archives it.
// Kept free of the DOM so node can test it.

/**
 * The confirmation the Leave button asks for, naming what the caller's
 * leave does to the group.
 * @param {{userId:number, role:string}[]} members the group's members
 * @param {number} me the caller's user id
 */
export function leaveConfirmation(members, me) {
  const others = members.filter((m) => m.userId !== me);
  if (!others.length) return 'Confirm: you are the last member; the group will be archived';
  if (members.find((m) => m.userId === me)?.role !== 'owner') return 'Confirm: leave';
  if (others.some((m) => m.role === 'admin')) return 'Confirm: the longest-standing admin will own it';
  return 'Confirm: the longest-standing member will own it';
}
