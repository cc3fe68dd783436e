// LoopbackDynamoDB starts DynamoDB Local bound to 127.0.0.1 only.
//
// DynamoDB Local has no bind-address option: its Jetty server listens on
// every interface, which would expose an unauthenticated database to the
// network. This launcher builds the server exactly as DynamoDB Local's own
// main does (same command-line arguments), then, before starting it, sets the
// host of each Jetty connector to the loopback address. The Jetty server is
// a private field of DynamoDBProxyServer, so it is reached by reflection; if a
// future DynamoDB Local renames it, this fails loudly instead of silently
// listening everywhere.
//
// Compiled by localstack/stack.sh install against the jar from npm.

import java.lang.reflect.Field;

import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public final class LoopbackDynamoDB {
    private static final String HOST = "127.0.0.1";

    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        if (proxy == null) {
            // -help, or arguments DynamoDB Local rejected (it printed why).
            System.exit(2);
        }
        Field f = DynamoDBProxyServer.class.getDeclaredField("server");
        f.setAccessible(true);
        Server server = (Server) f.get(proxy);
        int bound = 0;
        for (Connector c : server.getConnectors()) {
            if (!(c instanceof ServerConnector)) {
                throw new IllegalStateException("unexpected connector " + c.getClass().getName() + "; refusing to start unbound");
            }
            ((ServerConnector) c).setHost(HOST);
            bound++;
        }
        if (bound == 0) {
            throw new IllegalStateException("DynamoDB Local has no connector to bind; refusing to start");
        }
        proxy.start();
        System.out.println("LoopbackDynamoDB: listening on " + HOST + " (" + bound + " connector(s))");
        proxy.join();
    }
}
