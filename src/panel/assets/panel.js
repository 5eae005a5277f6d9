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
