package org.example.lifecycle;

import java.util.ArrayDeque;
import java.util.Deque;
import javax.annotation.PostConstruct;
import javax.annotation.PreDestroy;

/** A pretend connection pool whose connections are opened and closed by the container. */
public class ConnectionPool {

    private final int size;
    private final Deque<String> idle = new ArrayDeque<>();
    private final StringBuilder events;

    public ConnectionPool(int size, StringBuilder events) {
        this.size = size;
        this.events = events;
    }

    @PostConstruct
    void open() {
        for (int i = 1; i <= size; i++) {
            idle.push("conn-" + i);
        }
        events.append("pool+");
    }

    @PreDestroy
    void close() {
        idle.clear();
        events.append("pool-");
    }

    public int idleCount() {
        return idle.size();
    }
}
