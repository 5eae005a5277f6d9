import { type Html, unsafeRaw } from "./html.ts";

/**
 * Small inline SVG icons in the text colour, for places that used emoji (📄, 🖼️, ...): an emoji
 * renders as an empty box where no emoji font is installed; an inline SVG always draws. Decorative
 * (aria-hidden): the text beside each says what it is. Styled by `.icon` in panel.css.
 */
const PATHS: Record<string, string> = {
  // A picture: frame, sun, hill.
  image:
    '<rect x="3" y="4" width="18" height="16" rx="2"/><circle cx="9" cy="10" r="1.8"/><path d="m4 18 5.5-5.5 3.5 3.5 2.5-2.5L20 18"/>',
  // A film frame with a play mark.
  video: '<rect x="3" y="5" width="18" height="14" rx="2"/><path d="m10 9 5 3-5 3z"/>',
  // A page with a folded corner and lines.
  document:
    '<path d="M7 3h7l4 4v14H7a1 1 0 0 1-1-1V4a1 1 0 0 1 1-1z"/><path d="M14 3v4h4M9.5 12h5M9.5 15.5h5"/>',
  // A note.
  audio: '<path d="M9 18V6l10-2v12"/><circle cx="6.5" cy="18" r="2.5"/><circle cx="16.5" cy="16" r="2.5"/>',
  // A paper clip, for anything else.
  file: '<path d="m20 11.5-7.8 7.8a5 5 0 0 1-7.1-7.1l8.5-8.5a3.3 3.3 0 0 1 4.7 4.7l-8.5 8.5a1.7 1.7 0 0 1-2.4-2.4l7.8-7.8"/>',
};

/** The icon of a media type (image, video, document, audio; a paper clip for any other). */
export function mediaIcon(type: string): Html {
  const paths = PATHS[type] ?? PATHS.file;
  return unsafeRaw(
    `<svg class="icon" viewBox="0 0 24 24" width="16" height="16" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round" aria-hidden="true" focusable="false">${paths}</svg>`,
  );
}
