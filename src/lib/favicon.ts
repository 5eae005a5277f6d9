/**
 * The service's icon, made here (no binary file in the repository): a white envelope on the panel's
 * accent green. `/favicon.svg` for browsers that take SVG icons, `/favicon.ico` (a 32×32 32-bit ICO
 * drawn from the same shapes) for the ones that ask for it by default. The panel, /v2/docs,
 * /v2/reference and the queue dashboard link them.
 */

export const FAVICON_ICO_PATH = "/favicon.ico";
export const FAVICON_SVG_PATH = "/favicon.svg";

const ACCENT = [0x0b, 0x6e, 0x4f] as const;
const WHITE = [0xff, 0xff, 0xff] as const;

export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#0b6e4f"/><rect x="6" y="9" width="20" height="14" rx="2" fill="#fff"/><path d="M7.5 11 16 17.5 24.5 11" fill="none" stroke="#0b6e4f" stroke-width="2.2" stroke-linecap="round" stroke-linejoin="round"/></svg>`;

/** The envelope alone, in the text colour, for the panel's brand mark (inline, so no extra request). */
export const ENVELOPE_SVG = `<svg class="brand-icon" viewBox="0 0 32 32" width="22" height="22" aria-hidden="true" focusable="false"><rect width="32" height="32" rx="7" fill="currentColor"/><rect x="6" y="9" width="20" height="14" rx="2" fill="#fff"/><path d="M7.5 11 16 17.5 24.5 11" fill="none" stroke="currentColor" stroke-width="2.2" stroke-linecap="round" stroke-linejoin="round"/></svg>`;

/** Inside a rectangle with rounded corners (radius r). */
function inRoundedRect(x: number, y: number, left: number, top: number, w: number, h: number, r: number) {
  if (x < left || y < top || x > left + w || y > top + h) return false;
  const cx = Math.min(Math.max(x, left + r), left + w - r);
  const cy = Math.min(Math.max(y, top + r), top + h - r);
  return (x - cx) ** 2 + (y - cy) ** 2 <= r * r;
}

type Point = readonly [number, number];

function distanceToSegment(x: number, y: number, [ax, ay]: Point, [bx, by]: Point): number {
  const dx = bx - ax;
  const dy = by - ay;
  const t = Math.max(0, Math.min(1, ((x - ax) * dx + (y - ay) * dy) / (dx * dx + dy * dy)));
  return Math.hypot(x - (ax + t * dx), y - (ay + t * dy));
}

/** One sample of the icon: [r, g, b, a] with a in 0..1. */
function sample(x: number, y: number): [number, number, number, number] {
  if (!inRoundedRect(x, y, 0, 0, 32, 32, 7)) return [0, 0, 0, 0];
  if (inRoundedRect(x, y, 6, 9, 20, 14, 2)) {
    const onFlap =
      distanceToSegment(x, y, [7.5, 11], [16, 17.5]) <= 1.1 ||
      distanceToSegment(x, y, [16, 17.5], [24.5, 11]) <= 1.1;
    return onFlap ? [...ACCENT, 1] : [...WHITE, 1];
  }
  return [...ACCENT, 1];
}

/** 32×32 BGRA, rows bottom-up as a BMP stores them, each pixel averaged over 4×4 samples. */
function pixels(): Uint8Array {
  const size = 32;
  const out = new Uint8Array(size * size * 4);
  for (let row = 0; row < size; row++) {
    for (let col = 0; col < size; col++) {
      let r = 0;
      let g = 0;
      let b = 0;
      let a = 0;
      for (let sy = 0; sy < 4; sy++) {
        for (let sx = 0; sx < 4; sx++) {
          const [sr, sg, sb, sa] = sample(col + (sx + 0.5) / 4, row + (sy + 0.5) / 4);
          r += sr * sa;
          g += sg * sa;
          b += sb * sa;
          a += sa;
        }
      }
      const at = ((size - 1 - row) * size + col) * 4;
      out[at] = a ? Math.round(b / a) : 0;
      out[at + 1] = a ? Math.round(g / a) : 0;
      out[at + 2] = a ? Math.round(r / a) : 0;
      out[at + 3] = Math.round((a / 16) * 255);
    }
  }
  return out;
}

/** An ICO file with one 32×32, 32-bit image (BITMAPINFOHEADER, pixels, an all-opaque AND mask). */
function buildIco(): Uint8Array<ArrayBuffer> {
  const size = 32;
  const image = pixels();
  const mask = new Uint8Array(size * 4); // 1 bit per pixel, rows padded to 4 bytes: all 0 (alpha rules)
  const header = 40;
  const bytes = header + image.length + mask.length;
  const out = new Uint8Array(6 + 16 + bytes);
  const view = new DataView(out.buffer);
  view.setUint16(2, 1, true); // type: icon
  view.setUint16(4, 1, true); // one image
  out[6] = size;
  out[7] = size;
  view.setUint16(10, 1, true); // planes
  view.setUint16(12, 32, true); // bits per pixel
  view.setUint32(14, bytes, true);
  view.setUint32(18, 22, true); // where the image starts
  const bmp = 22;
  view.setUint32(bmp, header, true);
  view.setInt32(bmp + 4, size, true);
  view.setInt32(bmp + 8, size * 2, true); // the XOR image and the AND mask
  view.setUint16(bmp + 12, 1, true);
  view.setUint16(bmp + 14, 32, true);
  view.setUint32(bmp + 20, image.length + mask.length, true);
  out.set(image, bmp + header);
  out.set(mask, bmp + header + image.length);
  return out;
}

export const FAVICON_ICO: Uint8Array<ArrayBuffer> = buildIco();

/** The `<link>`s of a page's head. */
export const FAVICON_LINKS = `<link rel="icon" href="${FAVICON_ICO_PATH}" sizes="32x32"><link rel="icon" href="${FAVICON_SVG_PATH}" type="image/svg+xml">`;

const ICON_CACHE = "public, max-age=86400";

export function faviconResponse(kind: "ico" | "svg"): Response {
  return kind === "ico"
    ? new Response(FAVICON_ICO, {
        headers: {
          "content-type": "image/x-icon",
          "cache-control": ICON_CACHE,
          "x-content-type-options": "nosniff",
        },
      })
    : new Response(FAVICON_SVG, {
        headers: {
          "content-type": "image/svg+xml",
          "cache-control": ICON_CACHE,
          "x-content-type-options": "nosniff",
          // An SVG opened on its own runs nothing.
          "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'",
        },
      });
}
