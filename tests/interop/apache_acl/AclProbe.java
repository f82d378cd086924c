// Signs NameServer requests with Apache RocketMQ's own AclClientRPCHook and prints each answer as
// "<step> <code> <remark>": tests/interop/test_apache_acl.py checks them against a rocketq NameServer.
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.common.protocol.RequestCode;
import org.apache.rocketmq.common.protocol.header.namesrv.GetRouteInfoRequestHeader;
import org.apache.rocketmq.common.protocol.header.namesrv.PutKVConfigRequestHeader;
import org.apache.rocketmq.common.protocol.header.namesrv.WipeWritePermOfBrokerRequestHeader;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

public class AclProbe {
    static NettyRemotingClient client(String ak, String sk) {
        NettyRemotingClient c = new NettyRemotingClient(new NettyClientConfig());
        c.registerRPCHook(new AclClientRPCHook(new SessionCredentials(ak, sk)));
        c.start();
        return c;
    }

    static void show(String step, RemotingCommand r) {
        System.out.println(step + " " + r.getCode() + " " + r.getRemark());
    }

    public static void main(String[] args) throws Exception {
        String addr = args[0];
        NettyRemotingClient ok = client(args[1], args[2]);
        NettyRemotingClient bad = client(args[1], args[2] + "-wrong");
        PutKVConfigRequestHeader kv = new PutKVConfigRequestHeader();
        kv.setNamespace("APACHE");
        kv.setKey("k");
        kv.setValue("v");
        show("put_kv", ok.invokeSync(addr, RemotingCommand.createRequestCommand(RequestCode.PUT_KV_CONFIG, kv), 5000));
        WipeWritePermOfBrokerRequestHeader w = new WipeWritePermOfBrokerRequestHeader();
        w.setBrokerName("broker-x");
        RemotingCommand wipe = RemotingCommand.createRequestCommand(RequestCode.WIPE_WRITE_PERM_OF_BROKER, w);
        show("wipe", ok.invokeSync(addr, wipe, 5000));
        show("wipe_again", ok.invokeSync(addr, RemotingCommand.createRequestCommand(RequestCode.WIPE_WRITE_PERM_OF_BROKER, w), 5000));
        GetRouteInfoRequestHeader route = new GetRouteInfoRequestHeader();
        route.setTopic("NoSuchTopic");
        show("route", ok.invokeSync(addr, RemotingCommand.createRequestCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, route), 5000));
        kv.setKey("k2");
        show("put_kv_bad_secret", bad.invokeSync(addr, RemotingCommand.createRequestCommand(RequestCode.PUT_KV_CONFIG, kv), 5000));
        ok.shutdown();
        bad.shutdown();
    }
}
