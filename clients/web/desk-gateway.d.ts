// Type declarations of desk-gateway.js (checked by `tsc --noEmit --strict` on clients/web/test/consumer.ts in make test).

export type TicketStatus = "INITIALIZED" | "PROACTIVE" | "PENDING" | "ACTIVE" | "IDLE" | "WORK_IN_PROGRESS" | "CLOSED";
export type Priority = "LOW" | "MEDIUM" | "HIGH" | "URGENT";

export interface PendingOperation { id: number; kind: string }

export interface Ticket {
  id: number;
  channelUrl: string;
  title: string;
  status: TicketStatus;
  closeStatus: string;
  priority: Priority;
  team: { id: number; key: string | null; name: string | null } | null;
  agent: { id: number; name: string } | null;
  customFields: Record<string, string>;
  relatedChannelUrls: string[];
  createdAt: string;
  updatedAt: string;
  closedAt: string | null;
  closeComment: string | null;
  satisfaction: { score: number; comment: string | null } | null;
  pendingOperations: PendingOperation[];
  stale: boolean;
}

export interface TicketPage { items: Ticket[]; nextCursor: string | null; hasNext: boolean; stale: boolean }

export interface Operation {
  id: number;
  kind: string;
  ticketId: number;
  status: "pending" | "delivered" | "failed";
  attempts: number;
  reason: string | null;
  createdAt: string;
  finishedAt: string | null;
  /** How a delivered write reached Desk: with the customer's session, or as the application (Platform API) after
   * the customer did not sign in again within the sign-in wait; null while pending, when failed, or when a release
   * before this field delivered it. */
  deliveredAs: "customer" | "application" | null;
}

export interface Session { token: string; tokenType: string; expiresAt: string; userId: string }

/** 200: the fresh ticket; 202 (Desk unreachable, the change queued): the operation to poll with `waitForOperation`. */
export type WriteResult = { ticket: Ticket; operation: null } | { ticket: null; operation: Operation };

export interface TicketRead { ticket: Ticket | null; etag: string | null; notModified: boolean }

export interface FieldError { field: string; message: string }

/** Problem codes of openapi.yaml's `Problem`, and the client's own (`network_error`, `timeout`, `operation_failed`, `operation_pending`). */
export type ProblemCode =
  | "malformed_json" | "malformed_request" | "invalid_query" | "invalid_idempotency_key" | "unauthorized"
  | "invalid_credentials" | "desk_session_expired" | "forbidden" | "not_found" | "method_not_allowed"
  | "ticket_state_conflict" | "idempotency_in_progress" | "payload_too_large" | "unsupported_media_type"
  | "validation_failed" | "desk_rejected" | "url_not_allowed" | "preview_unavailable" | "preview_fetch_failed"
  | "previews_busy" | "idempotency_key_reused" | "rate_limited" | "internal_error" | "bad_gateway"
  | "desk_unavailable" | "service_unavailable" | "shutting_down" | "invalid_signature" | "webhooks_not_configured"
  | "report_too_large" | "reports_busy" | "report_timeout" | "uri_too_long" | "headers_too_large" | "http_version_not_supported"
  | "network_error" | "timeout" | "operation_failed" | "operation_pending";

export class GatewayError extends Error {
  constructor(init: {
    status: number; code: string; title?: string; detail?: string; errors?: FieldError[]; retryAfter?: number | null;
    requestId?: string | null; ticketStatus?: string | null; problem?: object;
  });
  readonly name: "GatewayError";
  /** HTTP status; 0 for a network failure (a CORS refusal included) or a timeout. */
  status: number;
  code: ProblemCode | string;
  title: string;
  detail: string;
  errors: FieldError[];
  /** Seconds, from `Retry-After`. */
  retryAfter: number | null;
  /** `X-Request-ID`: quote it when reporting a problem. */
  requestId: string | null;
  ticketStatus: string | null;
  problem: Record<string, unknown>;
}

/** Cancels a call (its retries and waits too) with `signal`; bounds it, waits included, with `timeoutMs`. */
export interface CallOptions { signal?: AbortSignal; timeoutMs?: number }
export interface WriteOptions extends CallOptions {
  /** Keep it to retry the same write later: the gateway replays the first answer instead of writing twice. */
  idempotencyKey?: string;
}

export interface MessageClassification {
  kind: "url_preview" | "closure_inquiry" | "csat" | "system" | "notification" | "bot" | "plain";
  type: string | null;
  state: "WAITING" | "CONFIRMED" | "DECLINED" | null;
  visibleToCustomer: boolean;
  ticketId: number | null;
  score: number | null;
  comment: string | null;
}

export interface NewTicket {
  title: string;
  userName: string;
  groupKey?: string | null;
  priority?: Priority | null;
  customFields?: Record<string, string | number | boolean> | null;
  relatedChannelUrls?: string[] | null;
}

export interface ListFilter extends CallOptions {
  status?: "open" | "closed" | "all";
  limit?: number;
  cursor?: string | null;
  customFields?: Record<string, string>;
}

export interface LinkPreview {
  url: string;
  title: string | null;
  description: string | null;
  siteName: string | null;
  image: string | null;
  message: { customType: "SENDBIRD_DESK_RICH_MESSAGE"; data: string };
}

export interface DeskGatewayOptions {
  /** Absolute (`https://gateway.example.com`) or, in a page, relative to it (`/api`). */
  baseUrl: string;
  token?: string | null;
  /** Retries of a 429, and of a 503 when the request is safe to repeat (2). */
  maxRetries?: number;
  /** Longest wait for one `Retry-After` (30000); never shorter than 1000. */
  maxRetryDelayMs?: number;
  /** Default bound of every call, waits included (0: none). */
  timeoutMs?: number;
  onRetry?: (info: { status: number; code: string; delayMs: number; attempt: number }) => void;
  /** A signed-in call got 401: return a new session token (e.g. from `signIn`) to make the call once more, or null. */
  onSessionExpired?: ((info: { code: string; status: number }) => string | null | Promise<string | null>) | null;
  fetch?: typeof fetch;
}

export function newIdempotencyKey(): string;
export function classifyMessage(customType: string | null | undefined, data: string | null | undefined): MessageClassification;

export class DeskGateway {
  constructor(options: DeskGatewayOptions);
  baseUrl: string;
  token: string | null;
  maxRetries: number;
  maxRetryDelayMs: number;
  timeoutMs: number;
  onRetry: NonNullable<DeskGatewayOptions["onRetry"]>;
  onSessionExpired: DeskGatewayOptions["onSessionExpired"];
  etags: Map<string, { etag: string; ticket: Ticket }>;

  request(method: string, path: string, options?: CallOptions & {
    body?: unknown; query?: Record<string, string | number | boolean | null | undefined | Array<string | number>>;
    headers?: Record<string, string>; idempotent?: boolean;
  }): Promise<{ status: number; headers: Headers; body: any }>;

  signIn(userId: string, accessToken?: string, options?: CallOptions): Promise<Session>;
  signOut(options?: CallOptions): Promise<void>;

  createTicket(ticket: NewTicket, options?: WriteOptions): Promise<{ ticket: Ticket; location: string | null }>;
  getTicket(id: number, options?: CallOptions): Promise<TicketRead>;
  getTicketByChannel(channelUrl: string, options?: CallOptions): Promise<TicketRead>;
  listTickets(filter?: ListFilter): Promise<TicketPage>;
  allTickets(filter?: ListFilter): AsyncGenerator<Ticket, void, undefined>;
  openCount(options?: CallOptions): Promise<{ count: number; stale: boolean }>;
  closeTicket(id: number, options?: WriteOptions & { comment?: string | null }): Promise<WriteResult>;
  reopenTicket(id: number, options?: WriteOptions): Promise<WriteResult>;
  answerClosureInquiry(id: number, messageId: number, confirm: boolean, options?: WriteOptions): Promise<WriteResult>;
  submitFeedback(id: number, messageId: number, score: number | null, comment?: string | null, options?: WriteOptions): Promise<WriteResult>;
  setCustomFields(id: number, customFields: Record<string, string>, options?: CallOptions): Promise<WriteResult>;
  setRelatedChannels(id: number, channelUrls: string[], options?: CallOptions): Promise<WriteResult>;
  selectQuestion(id: number, faqFileId: number, question: string, options?: WriteOptions): Promise<Ticket>;
  setPriority(id: number, priority: Priority, options?: CallOptions): Promise<WriteResult>;
  cancelAssignment(id: number, options?: WriteOptions & { groupKey?: string | null }): Promise<WriteResult>;
  setCustomerCustomFields(customFields: Record<string, string>, options?: CallOptions): Promise<{ userId: string; customFields: Record<string, string> }>;

  linkPreview(url: string, options?: WriteOptions): Promise<LinkPreview>;
  classifyMessage(customType: string | null | undefined, data: string | null | undefined): MessageClassification;

  getOperation(id: number, options?: CallOptions): Promise<Operation>;
  /** Polls until `delivered` (or throws `operation_failed`); a write waiting for a new sign-in calls `onSessionExpired` once. */
  waitForOperation(operation: Operation | number, options?: { intervalMs?: number; timeoutMs?: number; signal?: AbortSignal }): Promise<Operation>;
}
