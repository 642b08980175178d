// A strict TypeScript consumer of the web client: `tsc --noEmit --strict` on this file (make test) fails when the
// declarations and the way an app uses them part ways. It is type-checked, not run.
import { DeskGateway, GatewayError, classifyMessage, newIdempotencyKey } from "../desk-gateway.js";
import type { MessageClassification, Operation, Ticket, TicketPage, WriteResult } from "../desk-gateway.js";

async function journey(storedSendbirdToken: string): Promise<number> {
  const gateway: DeskGateway = new DeskGateway({
    baseUrl: "/api",
    timeoutMs: 10_000,
    onRetry: ({ status, delayMs }) => console.log(`retrying after ${status} in ${delayMs} ms`),
    onSessionExpired: async () => (await gateway.signIn("demo-customer", storedSendbirdToken)).token,
  });
  const session = await gateway.signIn("demo-customer", storedSendbirdToken);
  const expires: Date = new Date(session.expiresAt);
  const controller = new AbortController();
  const key = newIdempotencyKey();
  const { ticket } = await gateway.createTicket({ title: "Help", userName: "Demo", priority: "HIGH" },
                                                { idempotencyKey: key, signal: controller.signal });
  const page: TicketPage = await gateway.listTickets({ status: "open", limit: 20, timeoutMs: 5_000 });
  let count = page.items.length;
  for await (const each of gateway.allTickets({ status: "all" })) count += each.id > 0 ? 1 : 0;
  const read = await gateway.getTicket(ticket.id, { signal: controller.signal });
  const title: string | undefined = read.ticket?.title;
  const result: WriteResult = await gateway.submitFeedback(ticket.id, 42, 5, "thanks", { idempotencyKey: key });
  if (result.operation) {
    const done: Operation = await gateway.waitForOperation(result.operation, { signal: controller.signal });
    count += done.attempts;
  } else {
    const fresh: Ticket = result.ticket;
    count += fresh.satisfaction?.score ?? 0;
  }
  const closed = await gateway.closeTicket(ticket.id, { comment: null });
  const classified: MessageClassification = classifyMessage("SENDBIRD_DESK_RICH_MESSAGE", "{}");
  const same: MessageClassification = gateway.classifyMessage(null, undefined);
  const preview = await gateway.linkPreview("https://example.com/");
  await gateway.setCustomFields(ticket.id, { plan: "gold" });
  await gateway.setRelatedChannels(ticket.id, []);
  await gateway.setPriority(ticket.id, "URGENT");
  const asked: Ticket = await gateway.selectQuestion(ticket.id, 7, "How do I reset my password?");
  count += asked.id;
  await gateway.cancelAssignment(ticket.id, { groupKey: "billing", idempotencyKey: "k-1" });
  const open = await gateway.openCount();
  try {
    await gateway.reopenTicket(ticket.id);
  } catch (error) {
    if (error instanceof GatewayError && error.code === "ticket_state_conflict") count += error.status;
  }
  return count + expires.getTime() + (title?.length ?? 0) + (closed.ticket ? 1 : 0) + classified.kind.length +
    same.kind.length + (preview.title ?? "").length + open.count;
}

export { journey };
