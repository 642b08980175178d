package deskgateway;

/**
 * Called when a signed-in call gets 401 ({@code unauthorized}: the gateway session ended;
 * {@code desk_session_expired}: Desk's did), or a queued write waits for the customer to sign in again. Return a new
 * token (e.g. {@code new DeskGateway.Builder(url).build().authenticate(userId, sendbirdToken).token()} with the
 * Sendbird token the app keeps) and the call is made once more; null lets the error through. Runs on the calling
 * thread.
 */
public interface SessionExpiredHandler {
    String onSessionExpired(DeskGatewayException error);
}
