import { crc32, deflateSync } from "node:zlib";

/**
 * The files behind the simulator's inbound media (POST /_sim/inbound without `media_base64`): small,
 * valid and made once, so a panel can show the picture and open the PDF. Video and audio are short
 * stand-ins (bytes, not playable files): they are only ever downloaded.
 */

function chunk(type: string, data: Uint8Array): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

/** A 160x120 RGB picture: a green sky, a pale sun, two hills (what the panel's image icon draws). */
function landscapePng(width = 160, height = 120): Uint8Array<ArrayBuffer> {
  const raw = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    const row = y * (width * 3 + 1);
    raw[row] = 0; // filter: none
    for (let x = 0; x < width; x++) {
      const t = y / height;
      let rgb = [Math.round(37 - 30 * t), Math.round(211 - 117 * t), Math.round(102 - 18 * t)];
      if ((x - 50) ** 2 + (y - 40) ** 2 <= 15 ** 2) rgb = [255, 244, 204];
      const hill = Math.min(70 + Math.abs(x - 60) * 0.8, 95 + Math.abs(x - 130) * 0.9);
      if (y >= hill) rgb = [220, 248, 198];
      raw.set(rgb, row + 1 + x * 3);
    }
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit, truecolour, deflate, no filter, no interlace
  return new Uint8Array(
    Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      chunk("IHDR", header),
      chunk("IDAT", deflateSync(raw)),
      chunk("IEND", new Uint8Array(0)),
    ]),
  );
}

/** A one-page PDF saying where it came from, with a correct cross-reference table. */
function onePagePdf(): Uint8Array<ArrayBuffer> {
  const text = "BT /F1 18 Tf 72 720 Td (Simulated document from the WhatsApp sandbox) Tj ET";
  const objects = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
    `<< /Length ${text.length} >>\nstream\n${text}\nendstream`,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
  ];
  let out = "%PDF-1.4\n";
  const offsets: number[] = [];
  objects.forEach((object, index) => {
    offsets.push(out.length);
    out += `${index + 1} 0 obj\n${object}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) out += `${String(offset).padStart(10, "0")} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return new TextEncoder().encode(out);
}

export const SAMPLE_MEDIA = {
  image: { mimeType: "image/png", bytes: landscapePng() },
  document: { mimeType: "application/pdf", bytes: onePagePdf() },
  video: { mimeType: "video/mp4", bytes: new TextEncoder().encode("simulated video\n") },
  audio: { mimeType: "audio/ogg; codecs=opus", bytes: new TextEncoder().encode("simulated voice note\n") },
} as const;
