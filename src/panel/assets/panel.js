// The panel's own behaviour, on top of htmx. Everything works without it; it only adds comfort.

// Copy buttons: <button data-copy="#element-id">.
document.addEventListener("click", (event) => {
  const button = event.target instanceof Element ? event.target.closest("[data-copy]") : null;
  if (!button) return;
  const source = document.querySelector(button.getAttribute("data-copy"));
  if (!source) return;
  const text = source.textContent.trim();
  const done = () => {
    const label = button.textContent;
    button.textContent = "Copied";
    setTimeout(() => {
      button.textContent = label;
    }, 2000);
  };
  if (navigator.clipboard?.writeText)
    navigator.clipboard.writeText(text).then(done, () => selectText(source));
  else selectText(source);
});

function selectText(element) {
  const range = document.createRange();
  range.selectNodeContents(element);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}

// Forms with data-confirm ask first (the server has its own confirmation page without JavaScript).
document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form instanceof HTMLFormElement ? form.getAttribute("data-confirm") : null;
  if (question && !window.confirm(question)) event.preventDefault();
});

// == Conversations (issue 24) ==

// Times in the browser's own time zone. The server writes UTC (<time datetime> and a "… UTC"
// tooltip); exact times (time.local-time) are shown in local time, with UTC kept in the tooltip;
// relative times ("3 min ago") get the local time in their tooltip beside UTC.
const localFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

function localizeTimes(root) {
  if (!(root instanceof Element || root instanceof Document)) return;
  const times = root.querySelectorAll("time[datetime]");
  const all = root instanceof Element && root.matches("time[datetime]") ? [root, ...times] : times;
  for (const time of all) {
    if (time.hasAttribute("data-localized")) continue;
    const date = new Date(time.getAttribute("datetime"));
    if (Number.isNaN(date.getTime())) continue;
    const local = localFormat.format(date);
    if (time.classList.contains("local-time")) {
      time.textContent = local;
    } else {
      const utc = time.getAttribute("title");
      time.setAttribute("title", utc ? `${local} (your time) · ${utc}` : local);
    }
    time.setAttribute("data-localized", "");
  }
}

// The live preview of a template: each <mark data-var="body.1"> shows what its input holds.
function fillPreview(input) {
  const fields = input.closest(".template-fields");
  if (!fields) return;
  for (const mark of fields.querySelectorAll("mark[data-var]")) {
    if (mark.getAttribute("data-var") !== input.name) continue;
    const value = input.value.trim() ? input.value : mark.getAttribute("data-placeholder");
    mark.textContent = value;
    mark.classList.toggle("filled", input.value.trim() !== "");
  }
}

// A media header's preview (template-form.ts): its kind, and once a link is typed the file's name
// and host, with a link to open it; a link that is not https says so (the form refuses it too).
function fillMediaPreview(fields) {
  const preview = fields.querySelector("[data-media-preview]");
  const link = fields.querySelector("input[name='header_link']");
  if (!preview || !(link instanceof HTMLInputElement)) return;
  const text = preview.querySelector(".template-media-text");
  const open = preview.querySelector(".template-media-open");
  const label = text.getAttribute("data-label");
  const filename = fields.querySelector("input[name='header_filename']")?.value.trim() ?? "";
  const value = link.value.trim();
  let url = null;
  try {
    url = new URL(value);
  } catch {}
  const usable = url !== null && url.protocol === "https:" && url.hostname !== "";
  preview.classList.toggle("filled", usable);
  preview.classList.toggle("invalid", value !== "" && !usable);
  if (usable) {
    const last = url.pathname.split("/").filter(Boolean).at(-1);
    let name = filename;
    if (!name && last) {
      try {
        name = decodeURIComponent(last);
      } catch {
        name = last;
      }
    }
    text.textContent = `${label}: ${name || url.hostname}${name ? ` · ${url.hostname}` : ""}`;
    open.href = url.href;
  } else {
    text.textContent =
      value === "" ? `${label}: add its link below` : `${label}: the link must start with https://`;
    open.removeAttribute("href");
  }
  open.hidden = !usable;
}

function fillPreviews(root) {
  if (!(root instanceof Element || root instanceof Document)) return;
  for (const input of root.querySelectorAll("input[data-preview-var]")) fillPreview(input);
  const all = root instanceof Element && root.matches(".template-fields") ? [root] : [];
  for (const fields of [...all, ...root.querySelectorAll(".template-fields")]) fillMediaPreview(fields);
}

document.addEventListener("input", (event) => {
  const input = event.target;
  if (input instanceof HTMLInputElement && input.hasAttribute("data-preview-var")) fillPreview(input);
  if (input instanceof HTMLInputElement && input.hasAttribute("data-preview-media")) {
    const fields = input.closest(".template-fields");
    if (fields) fillMediaPreview(fields);
  }
});

// A message's details stay open when a poll redraws the thread (they load their timeline again).
let openDetails = [];
document.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail?.target;
  if (target instanceof Element && target.id === "thread") {
    openDetails = [...target.querySelectorAll("details.message-details[open]")].map((d) => d.id);
  }
});
document.addEventListener("htmx:oobBeforeSwap", (event) => {
  const target = event.detail?.target;
  if (target instanceof Element && target.id === "thread") {
    openDetails = [...target.querySelectorAll("details.message-details[open]")].map((d) => d.id);
  }
});
// Reopened once htmx has processed the new thread (htmx:load), so its "toggle once" trigger is
// listening and the timeline loads; reopening earlier would fire the toggle before that.
function reopenDetails(root) {
  if (openDetails.length === 0 || !(root instanceof Element)) return;
  openDetails = openDetails.filter((id) => {
    const details = document.getElementById(id);
    if (!(details instanceof HTMLDetailsElement) || !root.contains(details)) return true;
    details.open = true;
    return false;
  });
}

// The free-text draft across the 24-hour window (conversation-reply.ts). A poll replaces the
// free-text part (#reply-text) when the window opens or closes: what was typed in the box is kept
// per conversation (sessionStorage, or memory where that is refused), shown in the closed part's
// note, and put back in the box when the window opens. The focus, when it was in that part, goes
// to what replaced it (the note, the box) instead of falling to the page.
const memoryDrafts = new Map();
const drafts = {
  get(key) {
    try {
      const stored = sessionStorage.getItem(key);
      if (stored !== null) return stored;
    } catch {}
    return memoryDrafts.get(key) ?? null;
  },
  set(key, text) {
    memoryDrafts.set(key, text);
    try {
      sessionStorage.setItem(key, text);
    } catch {}
  },
  remove(key) {
    memoryDrafts.delete(key);
    try {
      sessionStorage.removeItem(key);
    } catch {}
  },
};
const draftKey = (part) => `panel-draft:${part.getAttribute("data-draft-for")}`;
let replyTextFocused = false;

function replyTextIn(root) {
  if (!(root instanceof Element || root instanceof Document)) return null;
  return root instanceof Element && root.matches("#reply-text[data-draft-for]")
    ? root
    : root.querySelector("#reply-text[data-draft-for]");
}

// A poll is about to replace the part: keep what the box (or the note) holds.
document.addEventListener("htmx:oobBeforeSwap", (event) => {
  const part = replyTextIn(event.detail?.target);
  if (!part) return;
  replyTextFocused = part.contains(document.activeElement);
  const box = part.querySelector("#reply-body");
  const kept = part.querySelector("#reply-draft:not([hidden]) #reply-draft-text");
  const text = box instanceof HTMLTextAreaElement ? box.value : (kept?.textContent ?? "");
  if (text.trim() !== "") drafts.set(draftKey(part), text);
});
// A send answers with the whole reply box: a text refused because the window closed comes back
// in the note (the server keeps it); a sent one is not a draft.
document.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail?.target;
  if (target instanceof Element && target.id === "reply") {
    replyTextFocused = target.querySelector("#reply-text")?.contains(document.activeElement) ?? false;
  }
});

function settleReplyText(root) {
  const part = replyTextIn(root);
  if (!part) return;
  const hadFocus = replyTextFocused;
  replyTextFocused = false;
  const focusLost = () =>
    hadFocus && (document.activeElement === null || document.activeElement === document.body);
  const key = draftKey(part);
  const box = part.querySelector("#reply-body");
  if (box instanceof HTMLTextAreaElement) {
    const draft = drafts.get(key);
    if (draft !== null) {
      if (box.value.trim() === "") box.value = draft;
      drafts.remove(key);
    }
    if (focusLost()) {
      box.focus();
      box.setSelectionRange(box.value.length, box.value.length);
    }
    return;
  }
  const note = part.querySelector("#reply-draft");
  const noteText = note?.querySelector("#reply-draft-text");
  if (!note || !noteText) return;
  if (!note.hidden) drafts.set(key, noteText.textContent);
  const draft = drafts.get(key);
  if (draft !== null) {
    noteText.textContent = draft;
    note.hidden = false;
    const discard = note.querySelector("#reply-draft-discard");
    if (discard) discard.hidden = false;
  }
  if (focusLost()) (note.hidden ? part.querySelector("#reply-closed") : note)?.focus();
}

document.addEventListener("click", (event) => {
  const button = event.target instanceof Element ? event.target.closest("#reply-draft-discard") : null;
  const part = button?.closest("#reply-text[data-draft-for]");
  if (!part) return;
  drafts.remove(draftKey(part));
  const note = part.querySelector("#reply-draft");
  if (note) note.hidden = true;
  part.querySelector("#reply-closed")?.focus();
});

// Whatever htmx adds (and the page itself, at start) gets local times and filled previews.
document.addEventListener("htmx:load", (event) => {
  localizeTimes(event.target);
  fillPreviews(event.target);
  reopenDetails(event.target);
  settleReplyText(event.target);
});
localizeTimes(document);
fillPreviews(document);
settleReplyText(document);

// == Webhooks (issue 42) ==

// The endpoint the address names (#we_…: the way back from its new secret) shows its details.
function openNamedEndpoint() {
  const id = decodeURIComponent(location.hash.slice(1));
  const section = id ? document.getElementById(id) : null;
  const details = section?.matches("section.endpoint")
    ? section.querySelector("details.endpoint-details")
    : null;
  if (details instanceof HTMLDetailsElement) details.open = true;
}
openNamedEndpoint();
window.addEventListener("hashchange", openNamedEndpoint);
