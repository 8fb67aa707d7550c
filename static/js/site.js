// Small progressive enhancements; every page works without this file.
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button || !navigator.clipboard) return;
  navigator.clipboard.writeText(button.dataset.copy).then(() => {
    const label = button.textContent;
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = label; }, 1200);
  });
});

// Upload progress: htmx reports XHR upload progress on the form that sent it.
document.addEventListener("htmx:xhr:progress", (event) => {
  const form = event.target.closest("form[data-upload-progress]");
  if (!form || !event.detail.lengthComputable) return;
  const box = form.querySelector(".upload-progress");
  const bar = box.querySelector("progress");
  const text = box.querySelector("span");
  box.hidden = false;
  const percent = Math.round((event.detail.loaded / event.detail.total) * 100);
  bar.value = percent;
  text.textContent = percent < 100 ? `Uploading… ${percent}%` : "Compiling the pack…";
});

// Forms that undo something ask first (e.g. revoking a run's URL); without JavaScript they
// submit straight away.
document.addEventListener("submit", (event) => {
  const form = event.target.closest("form[data-confirm]");
  if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
});

// The top bar's Menu button: below 960 px (site.css) it folds the links away and opens them on
// demand. The bar is marked data-menu only here, so without this file the button stays hidden
// and the links wrap instead.
function enableTopbarMenu() {
  const topbar = document.querySelector(".topbar");
  const button = topbar && topbar.querySelector(".menu-toggle");
  if (!button) return;
  const setOpen = (open) => {
    topbar.dataset.menu = open ? "open" : "closed";
    button.setAttribute("aria-expanded", String(open));
  };
  setOpen(false);
  button.addEventListener("click", () => setOpen(topbar.dataset.menu !== "open"));
  // Escape closes an open menu and gives the focus back to its button (only while the button
  // is shown: at desktop widths the links are always there).
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || topbar.dataset.menu !== "open") return;
    if (button.getClientRects().length === 0) return;
    setOpen(false);
    button.focus();
  });
}

enableTopbarMenu();
