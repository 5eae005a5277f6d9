/**
 * The benches' one way to an access token: the SDK's own (sdk/src, `accessToken()`), as an
 * integration gets one: the client-credentials grant with the SDK's retries (a 429 after its
 * Retry-After, a 502-504 or a refused connection with backoff: an api still starting, many tokens
 * asked for at once). The benches need the bearer token itself for wrk's token file and their raw
 * requests on the hot path.
 */
import { MessagingClient } from "../../sdk/src/index.ts";

export interface Credentials {
  clientId: string;
  clientSecret: string;
}

/**
 * An access token of `credentials` from the api at `apiUrl` (without `/v2`), or from an app in this
 * process (`handle`, e.g. `app.handle`). `maxAttempts`: the SDK's attempts on 5xx and network
 * errors (default 5); `onRetry` hears of each answer the SDK retries.
 */
export function accessToken(
  apiUrl: string,
  credentials: Credentials,
  options: {
    handle?: (request: Request) => Response | Promise<Response>;
    maxAttempts?: number;
    onRetry?: (why: string) => void;
  } = {},
): Promise<string> {
  const client = new MessagingClient({
    baseUrl: `${apiUrl}/v2`,
    ...credentials,
    ...(options.maxAttempts !== undefined && { retry: { maxAttempts: options.maxAttempts } }),
    fetch: async (input, init) => {
      const url = new URL(String(input));
      const response = await (options.handle ? options.handle(new Request(url, init)) : fetch(url, init));
      if (response.status === 429 || (response.status >= 502 && response.status <= 504)) {
        const body = await response
          .clone()
          .json()
          .catch(() => ({}));
        options.onRetry?.(`token request answered ${response.status} ${JSON.stringify(body)}; retrying`);
      }
      return response;
    },
  });
  return client.accessToken();
}
