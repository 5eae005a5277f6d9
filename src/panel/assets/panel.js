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

function fillPreviews(root) {
  if (!(root instanceof Element || root instanceof Document)) return;
  for (const input of root.querySelectorAll("input[data-preview-var]")) fillPreview(input);
}

document.addEventListener("input", (event) => {
  const input = event.target;
  if (input instanceof HTMLInputElement && input.hasAttribute("data-preview-var")) fillPreview(input);
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

// Whatever htmx adds (and the page itself, at start) gets local times and filled previews.
document.addEventListener("htmx:load", (event) => {
  localizeTimes(event.target);
  fillPreviews(event.target);
  reopenDetails(event.target);
});
localizeTimes(document);
fillPreviews(document);
