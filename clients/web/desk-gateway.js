// desk-gateway web client: one dependency-free ES module for browsers (and any runtime with fetch).
// Install it as a package (clients/web/package.json, types in desk-gateway.d.ts) or copy this file into a frontend;
// no build step. Every call maps to one route of openapi.yaml.

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
 *   reason: ?string, createdAt: string, finishedAt: ?string, deliveredAs: ?('customer'|'application')
 * }} Operation
 * @typedef {{token: string, tokenType: string, expiresAt: string, userId: string}} Session
 * @typedef {{ticket: (Ticket|null), operation: (Operation|null)}} WriteResult
 *   A write answered 200 carries the fresh ticket; one answered 202 (Desk unreachable, the change is queued)
 *   carries the operation to poll with `waitForOperation`.
 * @typedef {{ticket: (Ticket|null), etag: (string|null), notModified: boolean}} TicketRead
 * @typedef {{field: string, message: string}} FieldError
 * @typedef {{signal?: AbortSignal, timeoutMs?: number}} CallOptions
 *   `signal` cancels the call (its retries and `Retry-After` waits too: the promise rejects with the signal's reason);
 *   `timeoutMs` bounds the whole call, waits included (then `GatewayError` code `timeout`).
 * @typedef {{
 *   kind: ('url_preview'|'closure_inquiry'|'csat'|'system'|'notification'|'bot'|'plain'), type: ?string,
 *   state: ?('WAITING'|'CONFIRMED'|'DECLINED'), visibleToCustomer: boolean, ticketId: ?number, score: ?number,
 *   comment: ?string
 * }} MessageClassification
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

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts. */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", stop);
      resolve();
    }, ms);
    function stop() {
      clearTimeout(timer);
      reject(signal.reason);
    }
    signal?.addEventListener("abort", stop, { once: true });
  });
}

/** One signal for a call: the caller's, and a timeout of the whole call. */
function callSignal(signal, timeoutMs) {
  if (!(timeoutMs > 0)) return { signal, done: () => {} };
  const controller = new AbortController();
  const forward = () => controller.abort(signal.reason);
  if (signal?.aborted) controller.abort(signal.reason);
  else signal?.addEventListener("abort", forward, { once: true });
  const timer = setTimeout(() => controller.abort(new GatewayError({
    status: 0, code: "timeout", title: "Timed out", detail: `no answer within ${timeoutMs} ms`,
  })), timeoutMs);
  return { signal: controller.signal, done: () => { clearTimeout(timer); signal?.removeEventListener("abort", forward); } };
}

/** What a ticket-channel message is, from its Chat `customType` and `data` string, as the gateway's
 *  `POST /v1/messages/classify` says, computed here: no request per message.
 *  @param {?string} customType @param {?string} data @returns {MessageClassification} */
export function classifyMessage(customType, data) {
  let parsed = null;
  if (data) {
    try {
      parsed = JSON.parse(data);
    } catch {
      parsed = null;
    }
  }
  const payload = parsed && typeof parsed === "object" ? parsed : {};
  const inner = payload.body && typeof payload.body === "object" ? payload.body : {};
  const text = (value) => (typeof value === "string" ? value : null);
  const int = (value) => (Number.isInteger(value) ? value : null);
  const type = text(payload.type);
  const ticketId = int(inner.ticketId) ?? int(payload.ticket?.id);
  const rawState = text(inner.state) ?? text(inner.status);
  const state = ["WAITING", "CONFIRMED", "DECLINED"].includes(rawState) ? rawState : null;
  const result = (kind, fields) => ({
    kind, type: null, state: null, visibleToCustomer: true, ticketId: null, score: null, comment: null, ...fields,
  });
  switch (customType) {
    case "SENDBIRD_DESK_RICH_MESSAGE":
      switch (type) {
        case "SENDBIRD_DESK_INQUIRE_TICKET_CLOSURE": return result("closure_inquiry", { type, state, ticketId });
        case "SENDBIRD_DESK_CUSTOMER_SATISFACTION":
          return result("csat", { type, state, ticketId, score: int(inner.customerSatisfactionScore),
                                  comment: text(inner.customerSatisfactionComment) });
        case "SENDBIRD_DESK_URL_PREVIEW": return result("url_preview", { type });
        default: return result("plain", { type });
      }
    case "SENDBIRD_DESK_ADMIN_MESSAGE_CUSTOM_TYPE":
      if ((type ?? "").startsWith("NOTIFICATION_")) return result("notification", { type, ticketId });
      return result("system", { type: type || null, visibleToCustomer: false, ticketId });
    case "SENDBIRD_DESK_BOT_MESSAGE":
      return result("bot", { type });
    default:
      return result("plain", {});
  }
}

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
   * @param {string} options.baseUrl the gateway: absolute ("https://gateway.example.com") or, in a page, relative to it
   *   ("/api" behind the same origin or a dev proxy)
   * @param {?string} [options.token] a bearer token from an earlier `signIn`
   * @param {number} [options.maxRetries] retries of a 429, and of a 503 when the request is safe to repeat (2)
   * @param {number} [options.maxRetryDelayMs] longest wait for one `Retry-After` (30000); never shorter than 1000
   * @param {number} [options.timeoutMs] default bound of every call, waits included (0: none; a call's own wins)
   * @param {(info: {status: number, code: string, delayMs: number, attempt: number}) => void} [options.onRetry]
   * @param {(info: {code: string, status: number}) => (?string|Promise<?string>)} [options.onSessionExpired]
   *   called on a 401 of a signed-in call (`unauthorized`: the gateway session ended; `desk_session_expired`: Desk's
   *   did): return a new session token (e.g. from `signIn` with the Sendbird token kept on the device) and the call
   *   is made once more with it; return null to let the error through
   * @param {typeof fetch} [options.fetch]
   */
  constructor({ baseUrl, token = null, maxRetries = 2, maxRetryDelayMs = 30000, timeoutMs = 0, onRetry = () => {},
                onSessionExpired = null, fetch: fetchImpl } = {}) {
    if (!baseUrl) throw new TypeError("baseUrl is required");
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = token;
    this.maxRetries = maxRetries;
    this.maxRetryDelayMs = Math.max(1000, maxRetryDelayMs);
    this.timeoutMs = timeoutMs;
    this.onRetry = onRetry;
    this.onSessionExpired = onSessionExpired;
    this.fetch = fetchImpl ?? globalThis.fetch.bind(globalThis);
    /** @type {Map<string, {etag: string, ticket: Ticket}>} ETags of tickets read, for If-None-Match */
    this.etags = new Map();
  }

  /**
   * One request. A 429 is retried after its `Retry-After` (the gateway did nothing); a 503 only when repeating
   * is safe (a GET, or a write with an Idempotency-Key). Other failures throw `GatewayError`.
   * @returns {Promise<{status: number, headers: Headers, body: any}>}
   */
  async request(method, path, { body, query, headers = {}, idempotent = method === "GET", signal, timeoutMs = this.timeoutMs } = {}) {
    const call = callSignal(signal, timeoutMs);
    try {
      return await this.#request(method, path, { body, query, headers, idempotent, signal: call.signal });
    } finally {
      call.done();
    }
  }

  /** The URL of `path`: a relative base resolves against the page (a same-origin deployment, a dev proxy). */
  #url(path) {
    const base = globalThis.location?.href;
    if (!base && !/^[a-z][a-z0-9+.-]*:/i.test(this.baseUrl)) {
      throw new TypeError(`baseUrl "${this.baseUrl}" is relative and there is no page to resolve it against: give an absolute URL`);
    }
    return new URL(this.baseUrl + path, base);
  }

  async #request(method, path, { body, query, headers, idempotent, signal }) {
    const url = this.#url(path);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value == null) continue;
      for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(one));
    }
    const all = { Accept: "application/json", ...headers };
    if (body !== undefined) all["Content-Type"] = "application/json";
    let renewed = false;
    for (let attempt = 0; ; attempt++) {
      if (this.token) all.Authorization = `Bearer ${this.token}`;
      let response;
      try {
        response = await this.fetch(url, { method, headers: all, signal, body: body === undefined ? undefined : JSON.stringify(body) });
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        // fetch gives no detail on purpose (a CORS refusal looks the same as a dropped connection).
        throw new GatewayError({ status: 0, code: "network_error", title: "Network error", detail: String(error?.message ?? error) });
      }
      if (response.status < 400) {
        const text = response.status === 204 || response.status === 304 ? "" : await response.text();
        return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
      }
      const error = await this.#problem(response);
      const expired = response.status === 401 && (error.code === "unauthorized" || error.code === "desk_session_expired");
      if (expired && all.Authorization && !renewed && this.onSessionExpired && !path.startsWith("/v1/sessions")) {
        renewed = true;
        const token = await this.onSessionExpired({ code: error.code, status: response.status });
        if (signal?.aborted) throw signal.reason;
        if (token) {
          this.token = token;
          attempt--;
          continue;
        }
      }
      const retryable = response.status === 429 || (response.status === 503 && idempotent);
      if (retryable && attempt < this.maxRetries && error.retryAfter != null) {
        // Never sooner than a second, whatever the hint says.
        const delayMs = Math.max(1000, Math.min(this.maxRetryDelayMs, error.retryAfter * 1000));
        this.onRetry({ status: response.status, code: error.code, delayMs, attempt: attempt + 1 });
        await sleep(delayMs, signal);
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

  /** A write that is safe to retry: one Idempotency-Key for all its attempts. */
  #write(method, path, body, { idempotencyKey = newIdempotencyKey(), signal, timeoutMs } = {}) {
    return this.request(method, path, { body, headers: { "Idempotency-Key": idempotencyKey }, idempotent: true, signal, timeoutMs });
  }

  /** @returns {WriteResult} */
  #result(answer) {
    return answer.status === 202 ? { ticket: null, operation: answer.body } : { ticket: answer.body, operation: null };
  }

  /** `/v1/tickets/{id}…` with the id as one encoded segment. */
  static #ticketPath(id, rest = "") {
    return `/v1/tickets/${encodeURIComponent(id)}${rest}`;
  }

  // Sessions

  /**
   * Signs a customer in with their Sendbird user id and access token; later calls use the session.
   * @param {string} userId @param {string} [accessToken] @param {CallOptions} [options] @returns {Promise<Session>}
   */
  async signIn(userId, accessToken = "", { signal, timeoutMs } = {}) {
    const { body } = await this.request("POST", "/v1/sessions", { body: { userId, accessToken }, signal, timeoutMs });
    this.token = body.token;
    return body;
  }

  /** Revokes the current session. @param {CallOptions} [options] */
  async signOut({ signal, timeoutMs } = {}) {
    try {
      await this.request("DELETE", "/v1/sessions/current", { signal, timeoutMs });
    } finally {
      this.token = null;
      this.etags.clear();
    }
  }

  // Tickets

  /**
   * @param {{title: string, userName: string, groupKey?: ?string, priority?: ?string,
   *          customFields?: ?Object<string, string|number|boolean>, relatedChannelUrls?: ?string[]}} ticket
   * @param {CallOptions & {idempotencyKey?: string}} [options] keep the key to retry the same creation later
   * @returns {Promise<{ticket: Ticket, location: ?string}>}
   */
  async createTicket(ticket, options = {}) {
    const answer = await this.#write("POST", "/v1/tickets", ticket, options);
    return { ticket: answer.body, location: answer.headers.get("Location") };
  }

  /**
   * Reads a ticket, sending the ETag of the last read (If-None-Match): an unchanged ticket costs a 304.
   * @param {number} id @param {CallOptions} [options] @returns {Promise<TicketRead>}
   */
  async getTicket(id, options = {}) {
    return this.#read(DeskGateway.#ticketPath(id), `id:${id}`, options);
  }

  /** @param {string} channelUrl @param {CallOptions} [options] @returns {Promise<TicketRead>} */
  async getTicketByChannel(channelUrl, options = {}) {
    return this.#read(`/v1/tickets/by-channel/${encodeURIComponent(channelUrl)}`, `channel:${channelUrl}`, options);
  }

  async #read(path, cacheKey, { signal, timeoutMs } = {}) {
    const known = this.etags.get(cacheKey);
    const answer = await this.request("GET", path, { headers: known ? { "If-None-Match": known.etag } : {}, signal, timeoutMs });
    if (answer.status === 304 && known) return { ticket: known.ticket, etag: known.etag, notModified: true };
    const etag = answer.headers.get("ETag");
    if (etag) this.etags.set(cacheKey, { etag, ticket: answer.body });
    return { ticket: answer.body, etag, notModified: false };
  }

  /**
   * One page, newest first.
   * @param {{status?: ('open'|'closed'|'all'), limit?: number, cursor?: ?string, customFields?: Object<string, string>}
   *         & CallOptions} [filter]
   * @returns {Promise<TicketPage>}
   */
  async listTickets({ status, limit, cursor, customFields, signal, timeoutMs } = {}) {
    const customField = Object.entries(customFields ?? {}).map(([key, value]) => `${key}:${value}`);
    const { body } = await this.request("GET", "/v1/tickets", { query: { status, limit, cursor, customField }, signal, timeoutMs });
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

  /** @param {CallOptions} [options] @returns {Promise<{count: number, stale: boolean}>} */
  async openCount({ signal, timeoutMs } = {}) {
    return (await this.request("GET", "/v1/tickets/open-count", { signal, timeoutMs })).body;
  }

  /** @param {number} id @param {CallOptions & {comment?: ?string, idempotencyKey?: string}} [options] @returns {Promise<WriteResult>} */
  async closeTicket(id, { comment = null, ...options } = {}) {
    return this.#result(await this.#write("POST", DeskGateway.#ticketPath(id, "/close"), { comment }, options));
  }

  /** @param {number} id @param {CallOptions & {idempotencyKey?: string}} [options] @returns {Promise<WriteResult>} */
  async reopenTicket(id, options = {}) {
    return this.#result(await this.#write("POST", DeskGateway.#ticketPath(id, "/reopen"), {}, options));
  }

  /**
   * Answers the agent's closure inquiry (the message id comes from the ticket's chat channel).
   * @param {number} id @param {number} messageId @param {boolean} confirm
   * @param {CallOptions & {idempotencyKey?: string}} [options] @returns {Promise<WriteResult>}
   */
  async answerClosureInquiry(id, messageId, confirm, options = {}) {
    return this.#result(await this.#write("POST", DeskGateway.#ticketPath(id, "/closure-confirmation"), { messageId, confirm }, options));
  }

  /**
   * Answers the CSAT request `messageId` (from the ticket's chat channel); `score` 1–5, or null to decline.
   * @param {number} id @param {number} messageId @param {?number} score @param {?string} [comment]
   * @param {CallOptions & {idempotencyKey?: string}} [options] @returns {Promise<WriteResult>}
   */
  async submitFeedback(id, messageId, score, comment = null, options = {}) {
    return this.#result(await this.#write("POST", DeskGateway.#ticketPath(id, "/feedback"), { messageId, score, comment }, options));
  }

  /** Merges ticket custom fields. @param {number} id @param {Object<string, string>} customFields @param {CallOptions} [options] @returns {Promise<WriteResult>} */
  async setCustomFields(id, customFields, { signal, timeoutMs } = {}) {
    return this.#result(await this.request("PATCH", DeskGateway.#ticketPath(id, "/custom-fields"), { body: { customFields }, signal, timeoutMs }));
  }

  /** Replaces the related channels (at most 3). @param {number} id @param {string[]} channelUrls @param {CallOptions} [options] @returns {Promise<WriteResult>} */
  async setRelatedChannels(id, channelUrls, { signal, timeoutMs } = {}) {
    return this.#result(await this.request("PUT", DeskGateway.#ticketPath(id, "/related-channels"), { body: { channelUrls }, signal, timeoutMs }));
  }

  /**
   * Tells Desk which question the customer picked from an FAQ bot's suggestions (the SDK's `selectQuestion`):
   * `faqFileId` and the question come from the bot's message. Sent at once, never queued.
   * @param {number} id @param {number} faqFileId @param {string} question
   * @param {CallOptions & {idempotencyKey?: string}} [options] @returns {Promise<Ticket>}
   */
  async selectQuestion(id, faqFileId, question, options = {}) {
    return (await this.#write("POST", DeskGateway.#ticketPath(id, "/selected-question"), { faqFileId, question }, options)).body;
  }

  /**
   * Sets the ticket's priority (the SDK's `ticket.setPriority`).
   * @param {number} id @param {"LOW"|"MEDIUM"|"HIGH"|"URGENT"} priority @param {CallOptions} [options] @returns {Promise<WriteResult>}
   */
  async setPriority(id, priority, { signal, timeoutMs } = {}) {
    return this.#result(await this.request("PUT", DeskGateway.#ticketPath(id, "/priority"), { body: { priority }, signal, timeoutMs }));
  }

  /**
   * Gives the ticket back to the queue (the SDK's `ticket.cancel`): Desk takes it from its agent and routes it again,
   * into the team `groupKey` names when given.
   * @param {number} id @param {CallOptions & {groupKey?: ?string, idempotencyKey?: string}} [options] @returns {Promise<WriteResult>}
   */
  async cancelAssignment(id, { groupKey = null, ...options } = {}) {
    return this.#result(await this.#write("POST", DeskGateway.#ticketPath(id, "/cancel"), groupKey == null ? {} : { groupKey }, options));
  }

  /** Merges the customer's own custom fields. @param {Object<string, string>} customFields @param {CallOptions} [options] */
  async setCustomerCustomFields(customFields, { signal, timeoutMs } = {}) {
    return (await this.request("PATCH", "/v1/customers/me/custom-fields", { body: { customFields }, signal, timeoutMs })).body;
  }

  // Messages

  /** A page's preview and the ready-to-send URL-preview message. @param {string} url @param {CallOptions} [options] */
  async linkPreview(url, options = {}) {
    return (await this.#write("POST", "/v1/link-previews", { url }, options)).body;
  }

  /** What a chat message of a ticket channel is, and whether to show it: computed locally (see `classifyMessage`). */
  classifyMessage(customType, data) {
    return classifyMessage(customType, data);
  }

  // Operations (writes queued while Desk is unreachable)

  /** @param {number} id @param {CallOptions} [options] @returns {Promise<Operation>} */
  async getOperation(id, { signal, timeoutMs } = {}) {
    return (await this.request("GET", `/v1/operations/${encodeURIComponent(id)}`, { signal, timeoutMs })).body;
  }

  /**
   * Polls a queued write until Desk took it (`delivered`) or refused it (`failed`, throws with its reason). A write
   * that waits for the customer to sign in again (Desk ended their session meanwhile) calls `onSessionExpired` once.
   * @param {Operation|number} operation
   * @param {{intervalMs?: number, timeoutMs?: number, signal?: AbortSignal}} [options]
   * @returns {Promise<Operation>}
   */
  async waitForOperation(operation, { intervalMs = 1000, timeoutMs = 60000, signal } = {}) {
    const id = typeof operation === "number" ? operation : operation.id;
    const deadline = Date.now() + timeoutMs;
    let renewed = false;
    for (;;) {
      const current = await this.getOperation(id, { signal });
      if (current.status === "delivered") return current;
      // Desk ended the customer's session while the write waited: it goes through once they sign in again.
      if (current.status === "pending" && !renewed && this.onSessionExpired && current.reason?.startsWith("desk_session_expired")) {
        renewed = true;
        const token = await this.onSessionExpired({ code: "desk_session_expired", status: 401 });
        if (signal?.aborted) throw signal.reason;
        if (token) this.token = token;
      }
      if (current.status === "failed") {
        throw new GatewayError({ status: 409, code: "operation_failed", title: "Desk refused the change",
                                 detail: current.reason ?? "", problem: current });
      }
      if (Date.now() > deadline) {
        throw new GatewayError({ status: 0, code: "operation_pending", title: "Still queued", detail: `operation ${id}`, problem: current });
      }
      await sleep(intervalMs, signal);
    }
  }
}
