import { type ChannelProvider, ProviderError } from "../channel/provider.ts";
import type { Metrics } from "./index.ts";

/**
 * The channel provider with every call counted and timed: `provider_requests_total` and
 * `provider_request_duration_seconds` by operation (send_message, upload_media, list_templates, download_media) and
 * outcome (`ok`, or the normalized ProviderError code such as provider_unavailable; `error` for
 * anything else).
 */
export function instrumentProvider(provider: ChannelProvider, metrics: Metrics): ChannelProvider {
  const timed =
    <A extends unknown[], R>(operation: string, call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const started = performance.now();
      let outcome = "ok";
      try {
        return await call(...args);
      } catch (error) {
        outcome = error instanceof ProviderError ? error.code : "error";
        throw error;
      } finally {
        const labels = { operation, outcome };
        metrics.providerRequests.inc(labels);
        metrics.providerRequestDuration.observe(labels, (performance.now() - started) / 1000);
      }
    };
  return {
    sendMessage: timed("send_message", provider.sendMessage.bind(provider)),
    uploadMedia: timed("upload_media", provider.uploadMedia.bind(provider)),
    listTemplates: timed("list_templates", provider.listTemplates.bind(provider)),
    downloadMedia: timed("download_media", provider.downloadMedia.bind(provider)),
  };
}
