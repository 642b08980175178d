// desk-gateway web client: one dependency-free ES module for browsers (and any runtime with fetch).
// Copy this file into a frontend; no build step. Every call maps to one route of openapi.yaml.

/**
 * @typedef {{id: number, kind: string}} PendingOperation
 * @typedef {{
 *   id: number, channelUrl: string, title: string, status: string, closeStatus: string, priority: string,
 *   team: ({id: number, key: ?string, name: ?string}|null), agent: ({id: number, name: string}|null),
 *   customFields: Object<string, string>, relatedChannelUrls: string[], createdAt: string, updatedAt: string,
 *   closedAt: ?string, closeComment: ?string, satisfaction: ({score: number, comment: ?string}|null),
 *   pendingOperations: PendingOperation[], stale: boolean
 * }} Ticket
 * @typedef {{items: Ticket[], nextCursor: ?string, hasNext: boolean, stale: boolean}} TicketPage
 * @typedef {{
 *   id: number, kind: string, ticketId: number, status: ('pending'|'delivered'|'failed'), attempts: number,
 *   reason: ?string, createdAt: string, finishedAt: ?string
 * }} Operation
 * @typedef {{token: string, tokenType: string, expiresAt: string, userId: string}} Session
 * @typedef {{ticket: (Ticket|null), operation: (Operation|null)}} WriteResult
 *   A write answered 200 carries the fresh ticket; one answered 202 (Desk unreachable, the change is queued)
 *   carries the operation to poll with `waitForOperation`.
 * @typedef {{ticket: (Ticket|null), etag: (string|null), notModified: boolean}} TicketRead
 * @typedef {{field: string, message: string}} FieldError
 */

/** A problem+json answer (or a network failure, `code: "network_error"`) as a typed error. */
export class GatewayError extends Error {
  /**
   * @param {object} init
   * @param {number} init.status HTTP status (0 for a network failure, including a CORS refusal)
   * @param {string} init.code the problem's stable `code` (see openapi.yaml, `Problem`)
   * @param {string} [init.title]
   * @param {string} [init.detail]
   * @param {FieldError[]} [init.errors] field problems of a 422 `validation_failed`
   * @param {?number} [init.retryAfter] seconds, from `Retry-After`
   * @param {?string} [init.requestId] `X-Request-ID`: quote it when reporting a problem
   * @param {?string} [init.ticketStatus] the ticket's status on a 409 `ticket_state_conflict`
   * @param {object} [init.problem] the whole problem document
   */
  constructor({ status, code, title = "", detail = "", errors = [], retryAfter = null, requestId = null,
                ticketStatus = null, problem = {} }) {
    super(detail || title || code);
    this.name = "GatewayError";
    this.status = status;
    this.code = code;
    this.title = title;
    this.detail = detail;
    this.errors = errors;
    this.retryAfter = retryAfter;
    this.requestId = requestId;
    this.ticketStatus = ticketStatus;
    this.problem = problem;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** @returns {string} a fresh Idempotency-Key */
export function newIdempotencyKey() {
  if (globalThis.crypto?.randomUUID) return globalThis.crypto.randomUUID();
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Seconds from a `Retry-After` header (delta-seconds or an HTTP date), or null. */
function retryAfterSeconds(value) {
  if (value == null || value === "") return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, (date - Date.now()) / 1000);
}

export class DeskGateway {
  /**
   * @param {object} options
   * @param {string} options.baseUrl the gateway, e.g. "https://gateway.example.com"
   * @param {?string} [options.token] a bearer token from an earlier `signIn`
   * @param {number} [options.maxRetries] retries of a 429, and of a 503 when the request is safe to repeat (2)
   * @param {number} [options.maxRetryDelayMs] longest wait for one `Retry-After` (30000)
   * @param {(info: {status: number, code: string, delayMs: number, attempt: number}) => void} [options.onRetry]
   * @param {typeof fetch} [options.fetch]
   */
  constructor({ baseUrl, token = null, maxRetries = 2, maxRetryDelayMs = 30000, onRetry = () => {}, fetch: fetchImpl } = {}) {
    if (!baseUrl) throw new TypeError("baseUrl is required");
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = token;
    this.maxRetries = maxRetries;
    this.maxRetryDelayMs = maxRetryDelayMs;
    this.onRetry = onRetry;
    this.fetch = fetchImpl ?? globalThis.fetch.bind(globalThis);
    /** @type {Map<string, {etag: string, ticket: Ticket}>} ETags of tickets read, for If-None-Match */
    this.etags = new Map();
  }

  /**
   * One request. A 429 is retried after its `Retry-After` (the gateway did nothing); a 503 only when repeating
   * is safe (a GET, or a write with an Idempotency-Key). Other failures throw `GatewayError`.
   * @returns {Promise<{status: number, headers: Headers, body: any}>}
   */
  async request(method, path, { body, query, headers = {}, idempotent = method === "GET" } = {}) {
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value == null) continue;
      for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(one));
    }
    const all = { Accept: "application/json", ...headers };
    if (this.token) all.Authorization = `Bearer ${this.token}`;
    if (body !== undefined) all["Content-Type"] = "application/json";
    for (let attempt = 0; ; attempt++) {
      let response;
      try {
        response = await this.fetch(url, { method, headers: all, body: body === undefined ? undefined : JSON.stringify(body) });
      } catch (error) {
        // fetch gives no detail on purpose (a CORS refusal looks the same as a dropped connection).
        throw new GatewayError({ status: 0, code: "network_error", title: "Network error", detail: String(error?.message ?? error) });
      }
      if (response.status < 400) {
        const text = response.status === 204 || response.status === 304 ? "" : await response.text();
        return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
      }
      const error = await this.#problem(response);
      const retryable = response.status === 429 || (response.status === 503 && idempotent);
      if (retryable && attempt < this.maxRetries && error.retryAfter != null) {
        // Never sooner than a second, whatever the hint says.
        const delayMs = Math.max(1000, Math.min(this.maxRetryDelayMs, error.retryAfter * 1000));
        this.onRetry({ status: response.status, code: error.code, delayMs, attempt: attempt + 1 });
        await sleep(delayMs);
        continue;
      }
      throw error;
    }
  }

  async #problem(response) {
    let problem = {};
    try {
      problem = JSON.parse(await response.text());
    } catch {
      problem = {};
    }
    return new GatewayError({
      status: response.status,
      code: problem.code ?? `http_${response.status}`,
      title: problem.title ?? response.statusText,
      detail: problem.detail ?? "",
      errors: problem.errors ?? [],
      retryAfter: retryAfterSeconds(response.headers.get("Retry-After")),
      requestId: response.headers.get("X-Request-ID"),
      ticketStatus: problem.ticketStatus ?? null,
      problem,
    });
  }

  /** A POST that is safe to retry: one Idempotency-Key for all its attempts. */
  #write(method, path, body, idempotencyKey = newIdempotencyKey()) {
    return this.request(method, path, { body, headers: { "Idempotency-Key": idempotencyKey }, idempotent: true });
  }

  /** @returns {WriteResult} */
  #result(answer) {
    return answer.status === 202 ? { ticket: null, operation: answer.body } : { ticket: answer.body, operation: null };
  }

  // Sessions

  /** Signs a customer in with their Sendbird user id and access token; later calls use the session. @returns {Promise<Session>} */
  async signIn(userId, accessToken = "") {
    const { body } = await this.request("POST", "/v1/sessions", { body: { userId, accessToken } });
    this.token = body.token;
    return body;
  }

  /** Revokes the current session. */
  async signOut() {
    try {
      await this.request("DELETE", "/v1/sessions/current");
    } finally {
      this.token = null;
      this.etags.clear();
    }
  }

  // Tickets

  /**
   * @param {{title: string, userName: string, groupKey?: ?string, priority?: ?string,
   *          customFields?: ?Object<string, string|number|boolean>, relatedChannelUrls?: ?string[]}} ticket
   * @param {{idempotencyKey?: string}} [options] keep the key to retry the same creation later
   * @returns {Promise<{ticket: Ticket, location: ?string}>}
   */
  async createTicket(ticket, { idempotencyKey } = {}) {
    const answer = await this.#write("POST", "/v1/tickets", ticket, idempotencyKey);
    return { ticket: answer.body, location: answer.headers.get("Location") };
  }

  /**
   * Reads a ticket, sending the ETag of the last read (If-None-Match): an unchanged ticket costs a 304.
   * @returns {Promise<TicketRead>}
   */
  async getTicket(id) {
    return this.#read(`/v1/tickets/${encodeURIComponent(id)}`, `id:${id}`);
  }

  /** @returns {Promise<TicketRead>} */
  async getTicketByChannel(channelUrl) {
    return this.#read(`/v1/tickets/by-channel/${encodeURIComponent(channelUrl)}`, `channel:${channelUrl}`);
  }

  async #read(path, cacheKey) {
    const known = this.etags.get(cacheKey);
    const answer = await this.request("GET", path, { headers: known ? { "If-None-Match": known.etag } : {} });
    if (answer.status === 304 && known) return { ticket: known.ticket, etag: known.etag, notModified: true };
    const etag = answer.headers.get("ETag");
    if (etag) this.etags.set(cacheKey, { etag, ticket: answer.body });
    return { ticket: answer.body, etag, notModified: false };
  }

  /**
   * One page, newest first.
   * @param {{status?: ('open'|'closed'|'all'), limit?: number, cursor?: ?string, customFields?: Object<string, string>}} [filter]
   * @returns {Promise<TicketPage>}
   */
  async listTickets({ status, limit, cursor, customFields } = {}) {
    const customField = Object.entries(customFields ?? {}).map(([key, value]) => `${key}:${value}`);
    const { body } = await this.request("GET", "/v1/tickets", { query: { status, limit, cursor, customField } });
    return body;
  }

  /** Every ticket matching the filter, page after page. @returns {AsyncGenerator<Ticket>} */
  async *allTickets(filter = {}) {
    let cursor = null;
    do {
      const page = await this.listTickets({ ...filter, cursor });
      yield* page.items;
      cursor = page.hasNext ? page.nextCursor : null;
    } while (cursor);
  }

  /** @returns {Promise<{count: number, stale: boolean}>} */
  async openCount() {
    return (await this.request("GET", "/v1/tickets/open-count")).body;
  }

  /** @returns {Promise<WriteResult>} */
  async closeTicket(id, { comment = null, idempotencyKey } = {}) {
    return this.#result(await this.#write("POST", `/v1/tickets/${encodeURIComponent(id)}/close`, { comment }, idempotencyKey));
  }

  /** @returns {Promise<WriteResult>} */
  async reopenTicket(id, { idempotencyKey } = {}) {
    return this.#result(await this.#write("POST", `/v1/tickets/${encodeURIComponent(id)}/reopen`, {}, idempotencyKey));
  }

  /** Answers the agent's closure inquiry (the message id comes from the ticket's chat channel). @returns {Promise<WriteResult>} */
  async answerClosureInquiry(id, messageId, confirm, { idempotencyKey } = {}) {
    return this.#result(await this.#write("POST", `/v1/tickets/${encodeURIComponent(id)}/closure-confirmation`, { messageId, confirm }, idempotencyKey));
  }

  /**
   * Answers the CSAT request `messageId` (from the ticket's chat channel); `score` 1–5, or null to decline.
   * @returns {Promise<WriteResult>}
   */
  async submitFeedback(id, messageId, score, comment = null, { idempotencyKey } = {}) {
    return this.#result(await this.#write("POST", `/v1/tickets/${encodeURIComponent(id)}/feedback`, { messageId, score, comment }, idempotencyKey));
  }

  /** Merges ticket custom fields. @returns {Promise<WriteResult>} */
  async setCustomFields(id, customFields) {
    return this.#result(await this.request("PATCH", `/v1/tickets/${encodeURIComponent(id)}/custom-fields`, { body: { customFields } }));
  }

  /** Replaces the related channels (at most 3). @returns {Promise<WriteResult>} */
  async setRelatedChannels(id, channelUrls) {
    return this.#result(await this.request("PUT", `/v1/tickets/${encodeURIComponent(id)}/related-channels`, { body: { channelUrls } }));
  }

  /** Merges the customer's own custom fields. */
  async setCustomerCustomFields(customFields) {
    return (await this.request("PATCH", "/v1/customers/me/custom-fields", { body: { customFields } })).body;
  }

  // Messages

  /** A page's preview and the ready-to-send URL-preview message. */
  async linkPreview(url) {
    return (await this.#write("POST", "/v1/link-previews", { url })).body;
  }

  /** What a chat message of a ticket channel is, and whether to show it. */
  async classifyMessage(customType, data) {
    return (await this.#write("POST", "/v1/messages/classify", { customType, data })).body;
  }

  // Operations (writes queued while Desk is unreachable)

  /** @returns {Promise<Operation>} */
  async getOperation(id) {
    return (await this.request("GET", `/v1/operations/${encodeURIComponent(id)}`)).body;
  }

  /**
   * Polls a queued write until Desk took it (`delivered`) or refused it (`failed`, throws with its reason).
   * @param {Operation|number} operation
   * @returns {Promise<Operation>}
   */
  async waitForOperation(operation, { intervalMs = 1000, timeoutMs = 60000 } = {}) {
    const id = typeof operation === "number" ? operation : operation.id;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const current = await this.getOperation(id);
      if (current.status === "delivered") return current;
      if (current.status === "failed") {
        throw new GatewayError({ status: 409, code: "operation_failed", title: "Desk refused the change",
                                 detail: current.reason ?? "", problem: current });
      }
      if (Date.now() > deadline) {
        throw new GatewayError({ status: 0, code: "operation_pending", title: "Still queued", detail: `operation ${id}`, problem: current });
      }
      await sleep(intervalMs);
    }
  }
}
