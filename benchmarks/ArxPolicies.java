/*
 * ArxPolicies: ARX's optimal search (Flash, precision) on Adult for k, distinct l and equal-distance t.
 * Usage: java -cp 'ARXJARS/*:.' ArxPolicies DATA.csv HIERARCHY_DIR SUPPRESSION REPS K [SENSITIVE l|t VALUE]
 * One JSON line: policy, checked transformations, optimum levels, warm time (median of runs 2..REPS).
 */
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.*;
import org.deidentifier.arx.*;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.criteria.*;
import org.deidentifier.arx.metric.Metric;

public class ArxPolicies {
    public static void main(String[] a) throws Exception {
        String csv = a[0], hdir = a[1];
        double supp = Double.parseDouble(a[2]);
        int reps = Integer.parseInt(a[3]);
        int k = Integer.parseInt(a[4]);
        String sens = a.length > 5 ? a[5] : null, kind = a.length > 6 ? a[6] : null;
        double val = a.length > 7 ? Double.parseDouble(a[7]) : 0;
        String[] header = Files.newBufferedReader(Paths.get(csv), StandardCharsets.UTF_8).readLine().split(";", -1);
        Data data = Data.create(csv, StandardCharsets.UTF_8, ';');
        for (String h : header) {
            if (h.equals(sens)) data.getDefinition().setAttributeType(h, AttributeType.SENSITIVE_ATTRIBUTE);
            else data.getDefinition().setAttributeType(h, Hierarchy.create(
                Paths.get(hdir, "adult_hierarchy_" + h + ".csv").toString(), StandardCharsets.UTF_8, ';'));
        }
        ARXAnonymizer an = new ARXAnonymizer();
        List<Double> times = new ArrayList<>();
        ARXResult res = null;
        for (int r = 0; r < reps; r++) {
            data.getHandle().release();
            ARXConfiguration cfg = ARXConfiguration.create();
            if (k > 1) cfg.addPrivacyModel(new KAnonymity(k));
            if ("l".equals(kind)) cfg.addPrivacyModel(new DistinctLDiversity(sens, (int) val));
            if ("t".equals(kind)) cfg.addPrivacyModel(new EqualDistanceTCloseness(sens, val));
            cfg.setSuppressionLimit(supp);
            cfg.setQualityModel(Metric.createPrecisionMetric());
            long s = System.nanoTime();
            res = an.anonymize(data, cfg);
            times.add((System.nanoTime() - s) / 1e9);
        }
        List<Double> warm = new ArrayList<>(times.size() > 1 ? times.subList(1, times.size()) : times);
        Collections.sort(warm);
        ARXLattice.ARXNode opt = res.getGlobalOptimum();
        StringBuilder lv = new StringBuilder("{");
        int i = 0;
        for (String h : header) if (!h.equals(sens)) {
            lv.append(i++ == 0 ? "" : ",").append('"').append(h).append("\":").append(opt == null ? -1 : opt.getGeneralization(h));
        }
        lv.append("}");
        System.out.println("{\"k\":" + k + ",\"suppression\":" + supp + ",\"sensitive\":" + (sens == null ? "null" : "\"" + sens + "\"")
            + ",\"kind\":" + (kind == null ? "null" : "\"" + kind + "\"") + ",\"value\":" + val
            + ",\"checked\":" + res.getProcessStatistics().getTransformationsChecked()
            + ",\"warm_s\":" + String.format(Locale.ROOT, "%.4f", warm.get(warm.size() / 2))
            + ",\"optimum\":" + lv + "}");
    }
}
