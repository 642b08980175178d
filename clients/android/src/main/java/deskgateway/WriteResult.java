package deskgateway;

/**
 * What a write gave back: the fresh ticket (Desk took it), or the queued operation while Desk cannot be reached
 * ({@link DeskGateway#waitForOperation}).
 */
public final class WriteResult {
    private final Ticket ticket;
    private final Operation operation;

    WriteResult(Ticket ticket, Operation operation) {
        this.ticket = ticket;
        this.operation = operation;
    }

    /** The ticket as Desk has it now, or null when the write was queued. */
    public Ticket ticket() { return ticket; }
    /** The queued write, or null when Desk took it at once. */
    public Operation operation() { return operation; }
    public boolean isQueued() { return operation != null; }

    @Override public String toString() { return isQueued() ? "queued " + operation : "done " + ticket; }
}
