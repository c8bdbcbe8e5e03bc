package org.example.lifecycle;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import javax.annotation.PostConstruct;
import javax.annotation.PreDestroy;

/**
 * A minimal component container: {@link #start} calls each component's {@code @PostConstruct}
 * methods in registration order, {@link #stop} calls {@code @PreDestroy} methods in reverse order.
 */
public class Container {

    private final List<Object> started = new ArrayList<>();

    public void start(Object... components) {
        for (Object c : components) {
            invokeAnnotated(c, PostConstruct.class);
            started.add(c);
        }
    }

    public void stop() {
        for (int i = started.size() - 1; i >= 0; i--) {
            invokeAnnotated(started.get(i), PreDestroy.class);
        }
        started.clear();
    }

    public int size() {
        return started.size();
    }

    private static void invokeAnnotated(Object target, Class<? extends java.lang.annotation.Annotation> kind) {
        for (Method m : target.getClass().getDeclaredMethods()) {
            if (m.isAnnotationPresent(kind)) {
                if (m.getParameterCount() != 0) {
                    throw new IllegalStateException("@" + kind.getSimpleName() + " method takes arguments: " + m);
                }
                m.setAccessible(true);
                try {
                    m.invoke(target);
                } catch (IllegalAccessException e) {
                    throw new IllegalStateException(e);
                } catch (InvocationTargetException e) {
                    throw new IllegalStateException("lifecycle method failed: " + m.getName(), e.getCause());
                }
            }
        }
    }
}
